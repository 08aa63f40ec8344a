import { parseArguments } from './control-arguments.js';
import type { ControlReply } from './control-reply.js';
import { ControlProtocolError } from './errors.js';

/**
 * Typed views of the asynchronous events we subscribe to (control-spec §4.1) and of the GETINFO
 * answers that share their formats (circuit-status, stream-status, status/bootstrap-phase, ns/id).
 */

export interface RelayHop {
  /** 40 upper-case hex digits, without `$`. */
  fingerprint: string;
  nickname?: string;
}

export interface CircuitInfo {
  id: string;
  /** LAUNCHED, BUILT, GUARD_WAIT, EXTENDED, FAILED, CLOSED (unknown values are kept as sent). */
  status: string;
  path: RelayHop[];
  purpose?: string;
  buildFlags: string[];
  timeCreated?: string;
  reason?: string;
  /** With REASON=DESTROYED: the reason the relay that destroyed the circuit gave (control-spec §4.1.1). */
  remoteReason?: string;
}

export interface StreamInfo {
  id: string;
  /** NEW, NEWRESOLVE, REMAP, SENTCONNECT, SENTRESOLVE, SUCCEEDED, FAILED, CLOSED, DETACHED, … */
  status: string;
  /** "0" when the stream is not attached to a circuit. */
  circuitId: string;
  target: string;
  purpose?: string;
  reason?: string;
}

export interface BootstrapPhase {
  severity: string;
  progress: number;
  tag?: string;
  summary?: string;
  warning?: string;
}

export type TorEvent =
  | ({ type: 'CIRC' } & CircuitInfo)
  | ({ type: 'STREAM' } & StreamInfo)
  | { type: 'STATUS_CLIENT'; severity: string; action: string; keywords: Map<string, string>; bootstrap?: BootstrapPhase }
  | { type: 'OTHER'; name: string; text: string };

const FINGERPRINT = /^\$?([0-9A-Fa-f]{40})(?:[~=]([A-Za-z0-9]{1,19}))?$/;

export function parseHop(text: string): RelayHop {
  const m = FINGERPRINT.exec(text);
  if (!m) throw new ControlProtocolError('circuit hop is not $FINGERPRINT[~nick]', text);
  const hop: RelayHop = { fingerprint: m[1]!.toUpperCase() };
  if (m[2]) hop.nickname = m[2];
  return hop;
}

/** One circuit as in `650 CIRC <rest>` or a `GETINFO circuit-status` line. */
export function parseCircuitLine(text: string): CircuitInfo {
  const { positional, keywords } = parseArguments(text);
  const [id, status, pathText] = positional;
  if (!id || !/^\d+$/.test(id) || !status) throw new ControlProtocolError('circuit line needs an id and a status', text);
  const info: CircuitInfo = {
    id,
    status,
    path: pathText ? pathText.split(',').map(parseHop) : [],
    buildFlags: keywords.get('BUILD_FLAGS')?.split(',').filter((f) => f !== '') ?? [],
  };
  const purpose = keywords.get('PURPOSE');
  if (purpose !== undefined) info.purpose = purpose;
  const created = keywords.get('TIME_CREATED');
  if (created !== undefined) info.timeCreated = created;
  const reason = keywords.get('REASON');
  if (reason !== undefined) info.reason = reason;
  const remoteReason = keywords.get('REMOTE_REASON');
  if (remoteReason !== undefined) info.remoteReason = remoteReason;
  return info;
}

/** One stream as in `650 STREAM <rest>` or a `GETINFO stream-status` line. */
export function parseStreamLine(text: string): StreamInfo {
  const { positional, keywords } = parseArguments(text);
  const [id, status, circuitId, target] = positional;
  if (!id || !status || circuitId === undefined || !/^\d+$/.test(circuitId) || target === undefined) {
    throw new ControlProtocolError('stream line needs id, status, circuit and target', text);
  }
  const info: StreamInfo = { id, status, circuitId, target };
  const purpose = keywords.get('PURPOSE');
  if (purpose !== undefined) info.purpose = purpose;
  const reason = keywords.get('REASON');
  if (reason !== undefined) info.reason = reason;
  return info;
}

/** `NOTICE BOOTSTRAP PROGRESS=85 TAG=ap_conn_done SUMMARY="…"` (event arguments or status/bootstrap-phase). */
export function parseBootstrapPhase(text: string): BootstrapPhase | undefined {
  const { positional, keywords } = parseArguments(text);
  if (positional[1] !== 'BOOTSTRAP') return undefined;
  const progressText = keywords.get('PROGRESS');
  if (progressText === undefined || !/^\d{1,3}$/.test(progressText)) return undefined;
  const progress = Number(progressText);
  if (progress > 100) return undefined;
  const phase: BootstrapPhase = { severity: positional[0] ?? '', progress };
  const tag = keywords.get('TAG');
  if (tag !== undefined) phase.tag = tag;
  const summary = keywords.get('SUMMARY');
  if (summary !== undefined) phase.summary = summary;
  const warning = keywords.get('WARNING');
  if (warning !== undefined) phase.warning = warning;
  return phase;
}

/** Parses a 650 reply. Throws ControlProtocolError / ControlArgumentError on malformed known events. */
export function parseEvent(reply: ControlReply): TorEvent {
  const first = reply.lines[0];
  if (!first) throw new ControlProtocolError('empty event', '');
  const space = first.text.indexOf(' ');
  const name = space < 0 ? first.text : first.text.slice(0, space);
  const rest = space < 0 ? '' : first.text.slice(space + 1);
  switch (name) {
    case 'CIRC':
      return { type: 'CIRC', ...parseCircuitLine(rest) };
    case 'STREAM':
      return { type: 'STREAM', ...parseStreamLine(rest) };
    case 'STATUS_CLIENT': {
      const { positional, keywords } = parseArguments(rest);
      const event: TorEvent = {
        type: 'STATUS_CLIENT',
        severity: positional[0] ?? '',
        action: positional[1] ?? '',
        keywords,
      };
      const bootstrap = parseBootstrapPhase(rest);
      if (bootstrap) event.bootstrap = bootstrap;
      return event;
    }
    default:
      return { type: 'OTHER', name, text: rest };
  }
}

export interface RouterStatus {
  nickname: string;
  fingerprint: string;
  address: string;
  orPort: number;
  flags: string[];
}

/**
 * The router-status entry returned by `GETINFO ns/id/<fp>` (dir-spec §3.4.1). The `r` line is
 * `r nickname identity digest date time IP ORPort DirPort`; microdescriptor consensuses omit
 * the digest, so the address is found after the date and time instead of by position.
 */
export function parseRouterStatus(data: string): RouterStatus {
  const lines = data.split('\n');
  const r = lines.find((l) => l.startsWith('r '));
  if (!r) throw new ControlProtocolError('router status without an r line', data);
  const tokens = r.split(' ').filter((t) => t !== '');
  const dateIndex = tokens.findIndex((t, i) => i >= 3 && /^\d{4}-\d{2}-\d{2}$/.test(t));
  const address = tokens[dateIndex + 2];
  const orPort = Number(tokens[dateIndex + 3]);
  if (dateIndex < 0 || !address || !/^[0-9.]+$|^[0-9a-fA-F:]+$/.test(address) || !Number.isInteger(orPort)) {
    throw new ControlProtocolError('malformed r line', r);
  }
  const identity = Buffer.from(tokens[2]!, 'base64');
  if (identity.length !== 20) throw new ControlProtocolError('r line identity is not 20 bytes', r);
  const s = lines.find((l) => l.startsWith('s '));
  return {
    nickname: tokens[1]!,
    fingerprint: identity.toString('hex').toUpperCase(),
    address,
    orPort,
    flags: s ? s.slice(2).split(' ').filter((f) => f !== '') : [],
  };
}
