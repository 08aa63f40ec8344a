import { isAbsolute } from 'node:path';
import { TorrcOptionError } from './errors.js';
import { formatNodeList } from './node-list.js';

/**
 * Pure rendering of one instance's torrc. Everything listens on loopback only; tor runs in the
 * foreground as our child and exits by itself if the supervisor dies (__OwningControllerProcess).
 */

/** Where the control port listens. Unix sockets are preferred: no port to allocate, file permissions guard it. */
export type ControlEndpoint = { kind: 'unix'; path: string } | { kind: 'tcp'; port: number };

/**
 * Where the SocksPort listens. A Unix socket in the instance's private (0700) data directory is
 * the normal case: only this user can connect, so nobody on the host goes around the pool's
 * authentication, accounting and revocation. TCP is the fallback for a path too long for a socket.
 */
export type SocksEndpoint = { kind: 'unix'; path: string } | { kind: 'tcp'; port: number };

export interface TorrcOptions {
  dataDirectory: string;
  socks: SocksEndpoint;
  control: ControlEndpoint;
  cookieAuthFile: string;
  /** tor polls this PID (every 15 s) and exits when it is gone, so a crashed supervisor leaves no orphans. */
  owningControllerPid: number;
  conflux: boolean;
  maxCircuitDirtinessSecs: number;
  /** Normalised by node-list.ts; omitted or empty means tor's own choice. */
  exitNodes?: readonly string[];
  /** Written only when given. */
  strictNodes?: boolean;
  /** Appended verbatim after everything else, so they may override (private network, bridges, GeoIPFile). */
  extraLines?: readonly string[];
}

/** sun_path is 108 bytes on Linux including the terminating NUL. */
export const MAX_UNIX_SOCKET_PATH_BYTES = 107;

const MAX_CIRCUIT_DIRTINESS_LIMIT_SECS = 30 * 24 * 3600;

/** Any C0 control character but tab, or DEL, could end or corrupt a torrc line. */
function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return true;
  }
  return false;
}

function assertPort(option: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TorrcOptionError(option, `port must be an integer 1-65535, got ${String(port)}`);
  }
}

function assertNoControlCharacters(option: string, value: string): void {
  if (hasControlCharacter(value)) {
    throw new TorrcOptionError(option, 'value contains a newline or another control character');
  }
}

/** tor unescapes C-style quoted values; quoting every path keeps spaces, `#` and backslashes literal. */
function quotePath(option: string, path: string): string {
  assertNoControlCharacters(option, path);
  if (path.length === 0) throw new TorrcOptionError(option, 'path is empty');
  if (!isAbsolute(path)) throw new TorrcOptionError(option, `path must be absolute: ${JSON.stringify(path)}`);
  return `"${path.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

function assertSocketPath(option: string, path: string): void {
  if (Buffer.byteLength(path) > MAX_UNIX_SOCKET_PATH_BYTES) {
    throw new TorrcOptionError(option, `unix socket path is ${Buffer.byteLength(path)} bytes, the limit is ${MAX_UNIX_SOCKET_PATH_BYTES}`);
  }
}

// Pool credentials are never forwarded to tor; NoIsolateSOCKSAuth makes sure that even a stray
// username cannot split one instance over several exits. IPv6Traffic lets bracketed IPv6
// literals through.
const SOCKS_FLAGS = 'IPv6Traffic NoIsolateSOCKSAuth';

function socksLines(socks: SocksEndpoint): string[] {
  if (socks.kind === 'tcp') {
    assertPort('SocksPort', socks.port);
    return [`SocksPort 127.0.0.1:${socks.port} ${SOCKS_FLAGS}`, 'SocksPolicy accept 127.0.0.1', 'SocksPolicy reject *'];
  }
  assertSocketPath('SocksPort', socks.path);
  // No TCP SocksPort at all: tor would open 127.0.0.1:9050 by default without a SocksPort line
  // for TCP, but any SocksPort line replaces that default.
  return [`SocksPort unix:${quotePath('SocksPort', socks.path)} ${SOCKS_FLAGS}`];
}

function controlLine(control: ControlEndpoint): string {
  if (control.kind === 'tcp') {
    assertPort('ControlPort', control.port);
    return `ControlPort 127.0.0.1:${control.port}`;
  }
  assertSocketPath('ControlPort', control.path);
  return `ControlPort unix:${quotePath('ControlPort', control.path)}`;
}

function extraLine(line: string, index: number): string {
  const option = `extraLines[${index}]`;
  assertNoControlCharacters(option, line);
  // A trailing backslash is a line continuation in torrc: it would swallow the next line.
  if (/\\\s*$/.test(line)) throw new TorrcOptionError(option, 'line ends with a backslash (continuation)');
  return line;
}

export function renderTorrc(options: TorrcOptions): string {
  if (!Number.isInteger(options.owningControllerPid) || options.owningControllerPid < 1) {
    throw new TorrcOptionError('__OwningControllerProcess', `not a PID: ${String(options.owningControllerPid)}`);
  }
  const dirtiness = options.maxCircuitDirtinessSecs;
  if (!Number.isInteger(dirtiness) || dirtiness < 1 || dirtiness > MAX_CIRCUIT_DIRTINESS_LIMIT_SECS) {
    throw new TorrcOptionError('MaxCircuitDirtiness', `must be whole seconds 1-${MAX_CIRCUIT_DIRTINESS_LIMIT_SECS}`);
  }

  const lines = [
    '# Generated by exitpool for one pool instance; rewritten at every start.',
    `DataDirectory ${quotePath('DataDirectory', options.dataDirectory)}`,
    'RunAsDaemon 0',
    'ClientOnly 1',
    'Log notice stdout',
    'AvoidDiskWrites 1',
    `__OwningControllerProcess ${options.owningControllerPid}`,
    ...socksLines(options.socks),
    controlLine(options.control),
    'CookieAuthentication 1',
    `CookieAuthFile ${quotePath('CookieAuthFile', options.cookieAuthFile)}`,
    `ConfluxEnabled ${options.conflux ? 1 : 0}`,
    `MaxCircuitDirtiness ${dirtiness}`,
  ];
  if (options.exitNodes && options.exitNodes.length > 0) {
    lines.push(`ExitNodes ${formatNodeList('ExitNodes', options.exitNodes)}`);
  }
  if (options.strictNodes !== undefined) lines.push(`StrictNodes ${options.strictNodes ? 1 : 0}`);
  (options.extraLines ?? []).forEach((line, i) => lines.push(extraLine(line, i)));
  return lines.join('\n') + '\n';
}
