import type { DestinationProbeResult } from '../../shared/ipc/protocol.js';
import { probeOutcome } from './failure-classes.js';

/** A destination that failed the same way through two exits is its own fault for this long. */
export const DESTINATION_FAULT_TTL_MS = 10 * 60_000;
/** Destinations remembered (known faulty, or being checked); past it, failures are not judged (unknown). */
export const MAX_TRACKED_DESTINATIONS = 1_000;
/** Checks running at once; past it, failures are not judged (unknown): a flood of them can blame no exit. */
export const MAX_CONCURRENT_PROBES = 4;

/** Dials `destination` through an instance other than `except`; null when there is none to ask. */
export type DestinationProber = (destination: { host: string; port: number }, except: number) => Promise<DestinationProbeResult | null>;

/**
 * What the judgement of one failure decided: the exit's fault (the destination works through
 * another exit), the destination's (it fails the same way there), or unknown (no check could be
 * made, or it answered otherwise): only `exit` ever counts against the exit.
 */
export type Verdict = 'exit' | 'destination' | 'unknown';

interface Check {
  waiters: ((verdict: Verdict) => void)[];
}

/**
 * Who is to blame when a connection failed on its way to the destination (supervisor/verdicts/
 * failure-classes.ts): the destination is dialled once through another routable instance on
 * another exit. The same failure there makes it the destination's fault (remembered for
 * DESTINATION_FAULT_TTL_MS, so later failures to it cost no new check); a success there makes it
 * the exit's; anything else, or no check at all (no other instance, MAX_CONCURRENT_PROBES running,
 * MAX_TRACKED_DESTINATIONS remembered), is unknown and blames nobody. This departs from the SPEC's
 * "hostnames that fail to resolve are scored normally" (docs/architecture.md, "Decisions"): a
 * client chooses its destinations, so its failures alone must not burn an exit. One check per
 * destination and outcome at a time; bounded memory and concurrency.
 */
export class DestinationBlame {
  private readonly faulty = new Map<string, number>();
  private readonly checks = new Map<string, Check>();

  constructor(
    private readonly probe: DestinationProber,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Decides (now, or once the check answers) and calls `decided` exactly once. `outcome` is the
   * failure's (`reply:N` or `timeout`, failure-classes.ts).
   */
  judge(destination: string, outcome: string, instance: number, decided: (verdict: Verdict) => void): void {
    const key = `${destination}#${outcome}`;
    const until = this.faulty.get(key);
    if (until !== undefined) {
      if (until > this.now()) return decided('destination');
      this.faulty.delete(key);
    }
    const running = this.checks.get(key);
    if (running) {
      running.waiters.push(decided);
      return;
    }
    const target = parseDestination(destination);
    if (!target || this.checks.size >= MAX_CONCURRENT_PROBES || this.faulty.size + this.checks.size >= MAX_TRACKED_DESTINATIONS) {
      this.expire();
      return decided('unknown');
    }
    const check: Check = { waiters: [decided] };
    this.checks.set(key, check);
    const settle = (verdict: Verdict): void => {
      this.checks.delete(key);
      if (verdict === 'destination') this.faulty.set(key, this.now() + DESTINATION_FAULT_TTL_MS);
      for (const w of check.waiters) w(verdict);
    };
    this.probe(target, instance).then(
      (result) => {
        if (result === null) return settle('unknown');
        const seen = probeOutcome(result);
        settle(seen === 'ok' ? 'exit' : seen === outcome ? 'destination' : 'unknown');
      },
      () => settle('unknown'),
    );
  }

  /** Destinations known to fail by themselves now (diagnostics and tests). */
  get knownFaulty(): number {
    this.expire();
    return this.faulty.size;
  }

  private expire(): void {
    const now = this.now();
    for (const [key, until] of this.faulty) if (until <= now) this.faulty.delete(key);
  }
}

/** `host:port` or `[v6]:port` back into its parts; undefined when it is neither. */
export function parseDestination(destination: string): { host: string; port: number } | undefined {
  const at = destination.lastIndexOf(':');
  if (at <= 0) return undefined;
  const port = Number(destination.slice(at + 1));
  const host = destination.slice(0, at);
  if (!Number.isInteger(port) || port < 1 || port > 65535 || host === '' || host.length > 257) return undefined;
  if (host.includes(':') && !/^\[[0-9a-fA-F:.]+\]$/.test(host)) return undefined;
  return { host, port };
}
