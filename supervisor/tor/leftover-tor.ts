/**
 * Tors a previous supervisor on the same DATA_DIR left running: found by their command line
 * (`-f <this instance's torrc>`), ended before this instance's first tor starts.
 *
 * Why: when a supervisor dies without stopping its tors (kill -9, the OOM killer), each tor
 * notices through __OwningControllerProcess only at its next poll (up to 15 s later), and about
 * one in 500 then hangs in its own exit path (tor 0.4.9; internal/testnet/README.md). Meanwhile
 * it holds its DataDirectory's lock, so the tor a restarted service starts there gives up after
 * tor's own 5 s wait, and keeps failing for as long as the old one lives. pm2, a shell loop or
 * systemd with a short RestartSec start the service again at once.
 *
 * Only a tor whose owner, the supervisor PID its torrc names, is gone is ended: a live owner is
 * another exitpool on this DATA_DIR (its state lock refuses this start before any tor launches)
 * or a PID that was reused, and neither is ours to signal. Linux only (/proc); elsewhere nothing
 * is found and the old behaviour stays (tor's lock wait and the crash back-off).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../shared/logger.js';

/** SIGTERM → SIGKILL for a leftover: nobody is served through it, so no drain is owed. */
export const LEFTOVER_TOR_GRACE_MS = 2_000;
/** How long a SIGKILLed leftover may take to be gone before the start goes on regardless. */
const LEFTOVER_TOR_KILL_WAIT_MS = 5_000;
const LEFTOVER_POLL_MS = 50;

export interface LeftoverTor {
  readonly pid: number;
  /** The supervisor PID the torrc names (__OwningControllerProcess), when it names one. */
  readonly owner: number | undefined;
}

/** The owner a torrc names, or undefined (no torrc, no such line). */
export async function owningPidOf(torrcPath: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(torrcPath, 'utf8');
  } catch {
    return undefined;
  }
  const match = /^__OwningControllerProcess\s+(\d+)\s*$/m.exec(text);
  return match ? Number(match[1]) : undefined;
}

/**
 * Processes of this user whose command line runs `torrcPath` with -f (a tor of this instance),
 * except `self`. Anyone can start a process with any command line: another user's is never
 * taken for ours, even when the service runs as root.
 */
export function processesRunning(torrcPath: string, self = process.pid): number[] {
  const uid = process.getuid?.();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === self) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    const at = argv.indexOf('-f');
    if (at >= 0 && argv[at + 1] === torrcPath && (uid === undefined || realUidOf(pid) === uid)) found.push(pid);
  }
  return found;
}

function realUidOf(pid: number): number | undefined {
  try {
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return uid === undefined ? undefined : Number(uid);
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie (a zombie holds no lock: its files are closed). */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Ends the tors that run `torrcPath` for an owner that is gone (SIGTERM, then SIGKILL after
 * `graceMs`), and says so. Returns the leftovers it found, ended or left (a live owner).
 * Must run before the torrc is rewritten: the old one names the old owner.
 */
export async function endLeftoverTors(torrcPath: string, ownPid: number, log: Logger, graceMs = LEFTOVER_TOR_GRACE_MS): Promise<LeftoverTor[]> {
  const pids = processesRunning(torrcPath);
  if (pids.length === 0) return [];
  const owner = await owningPidOf(torrcPath);
  const leftovers = pids.map((pid) => ({ pid, owner }));
  if (owner === undefined || owner === ownPid || isRunning(owner)) {
    log.warn('a tor still runs this instance’s torrc and its owner is not known to be gone: left alone (tor waits for its data directory)', { pids, owner });
    return leftovers;
  }
  const startedAt = performance.now();
  signalAll(pids, 'SIGTERM');
  signalAll(pids, 'SIGCONT');
  let alive = await aliveAfter(pids, graceMs);
  if (alive.length > 0) {
    signalAll(alive, 'SIGKILL');
    alive = await aliveAfter(alive, LEFTOVER_TOR_KILL_WAIT_MS);
  }
  log.warn('ended a tor left running by a previous supervisor on this DATA_DIR (it held the data directory)', {
    pids,
    owner,
    ended: pids.filter((pid) => !alive.includes(pid)),
    stillAlive: alive,
    ms: Math.round(performance.now() - startedAt),
  });
  return leftovers;
}

function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

async function aliveAfter(pids: readonly number[], ms: number): Promise<number[]> {
  const deadline = performance.now() + ms;
  let alive = pids.filter(isRunning);
  while (alive.length > 0 && performance.now() < deadline) {
    await sleep(LEFTOVER_POLL_MS);
    alive = alive.filter(isRunning);
  }
  return alive;
}
