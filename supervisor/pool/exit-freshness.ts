import { addressBlock } from '../exits/exit-relay.js';
import type { ExitState } from './pool-instance.js';

/**
 * What makes an exit "new" for one session (supervisor/exits/README.md, "Rotations give a new
 * IP"): none of its recent exit IPs, none of their /24s, and not banned for a site it reported.
 * Pure: the pool passes the instances' cached exits and the ban check.
 */
export interface SessionExitHistory {
  /** Exit IPs to avoid: the session's recent ones and the one it leaves. */
  readonly addresses: readonly string[];
  /** Sites the session reported: exits banned for any of them are not new for it. */
  readonly domains: readonly string[];
}

export type BannedFor = (exit: { fingerprint: string; address: string }, domains: readonly string[]) => boolean;

export function isFreshExit(exit: ExitState, history: SessionExitHistory, bannedFor?: BannedFor): boolean {
  const ip = exit.exitIp;
  if (ip === '') return false;
  if (history.addresses.includes(ip)) return false;
  const blocks = new Set(history.addresses.map(addressBlock));
  if (blocks.has(addressBlock(ip))) return false;
  return history.domains.length === 0 || bannedFor === undefined || !bannedFor({ fingerprint: exit.exitFingerprint, address: ip }, history.domains);
}

/**
 * Where a session may go, best first: instances on a fresh exit (`fresh`); failing that, those
 * whose exit IP is at least none of the history's; failing that, any. An exit banned for a site
 * the session reported is offered only when no other candidate is left.
 */
export function rankByFreshness(candidates: readonly { id: number; exit: ExitState }[], history: SessionExitHistory, bannedFor?: BannedFor): { ids: number[]; fresh: boolean } {
  const fresh = candidates.filter((c) => isFreshExit(c.exit, history, bannedFor)).map((c) => c.id);
  if (fresh.length > 0) return { ids: fresh, fresh: true };
  const siteBanned = (c: { exit: ExitState }): boolean =>
    history.domains.length > 0 && bannedFor !== undefined && bannedFor({ fingerprint: c.exit.exitFingerprint, address: c.exit.exitIp }, history.domains);
  const allowed = candidates.filter((c) => !siteBanned(c));
  const otherIp = allowed.filter((c) => !history.addresses.includes(c.exit.exitIp)).map((c) => c.id);
  if (otherIp.length > 0) return { ids: otherIp, fresh: false };
  return { ids: (allowed.length > 0 ? allowed : candidates).map((c) => c.id), fresh: false };
}

/** The session's recent exits with `ip` added (newest last, at most `keep`). */
export function rememberExit(recent: readonly string[], ip: string, keep: number): string[] {
  if (ip === '' || keep === 0) return [...recent];
  return [...recent.filter((x) => x !== ip), ip].slice(-keep);
}
