/**
 * Tors a previous supervisor on the same DATA_DIR left running: found by their command line
 * (`-f <DATA_DIR>/tor/<i>/torrc`), ended before the service starts its own.
 *
 * Why: when a supervisor dies without stopping its tors (kill -9, the OOM killer), each tor
 * notices through __OwningControllerProcess only at its next poll (up to 15 s later), and about
 * one in 500 then hangs in its own exit path (tor 0.4.9; internal/testnet/README.md). Meanwhile
 * it holds its DataDirectory's lock, so the tor a restarted service starts there gives up after
 * tor's own 5 s wait, and keeps failing for as long as the old one lives. pm2, a shell loop or
 * systemd with a short RestartSec start the service again at once.
 *
 * Only a tor of the service's own user whose owner, the supervisor PID its torrc names, is gone
 * is ended: a live owner is another exitpool on this DATA_DIR or a PID that was reused, and
 * neither is ours to signal. Linux only (/proc); elsewhere nothing is found and the old
 * behaviour stays (tor's lock wait and the crash back-off).
 */
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { isProcessAlive, processCommandLine, processUid, terminateProcesses } from '../../shared/process/foreign-processes.js';
import { TORRC_FILE_NAME } from './instance-options.js';

/** SIGTERM → SIGKILL for a leftover: nobody is served through it, so no drain is owed. */
export const LEFTOVER_TOR_GRACE_MS = 2_000;
/** How long a SIGKILLed leftover may take to be gone before the start goes on regardless. */
const LEFTOVER_TOR_KILL_WAIT_MS = 5_000;

export interface LeftoverTor {
  readonly pid: number;
  readonly torrc: string;
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
 * Processes of this user, `self` excepted, whose command line runs an instance torrc under
 * `torRoot` (`-f <torRoot>/<i>/torrc`): pid → torrc. One pass over /proc. Anyone can start a
 * process with any command line: another user's is never taken for ours, even when the service
 * runs as root.
 */
export function torsRunningUnder(torRoot: string, self = process.pid): Map<number, string> {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return new Map();
  }
  const uid = process.getuid?.();
  const found = new Map<number, string>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === self) continue;
    const argv = processCommandLine(pid);
    const torrc = argv?.[argv.indexOf('-f') + 1];
    if (!argv?.includes('-f') || torrc === undefined) continue;
    if (path.basename(torrc) !== TORRC_FILE_NAME || path.dirname(path.dirname(torrc)) !== torRoot) continue;
    if (uid === undefined || processUid(pid) === uid) found.set(pid, torrc);
  }
  return found;
}

/**
 * Ends the tors that run an instance torrc under `torRoot` for an owner that is gone (SIGTERM,
 * then SIGKILL after `graceMs`), all at once, and says so. Returns every leftover found, ended or
 * left (a live owner, or none named). Must run before any instance rewrites its torrc: the old
 * one names the old owner.
 */
export async function endLeftoverTors(torRoot: string, ownPid: number, log: Logger, graceMs = LEFTOVER_TOR_GRACE_MS): Promise<LeftoverTor[]> {
  const running = torsRunningUnder(torRoot);
  if (running.size === 0) return [];
  const leftovers: LeftoverTor[] = [];
  for (const [pid, torrc] of running) leftovers.push({ pid, torrc, owner: await owningPidOf(torrc) });
  const ownerGone = (t: LeftoverTor): boolean => t.owner !== undefined && t.owner !== ownPid && !isProcessAlive(t.owner);
  const left = leftovers.filter((t) => !ownerGone(t));
  if (left.length > 0) {
    log.warn('a tor still runs an instance torrc of this DATA_DIR and its owner is not known to be gone: left alone (tor waits for its data directory)', {
      pids: left.map((t) => t.pid),
      owners: left.map((t) => t.owner ?? null),
    });
  }
  const gone = leftovers.filter(ownerGone);
  if (gone.length === 0) return leftovers;
  const ending = gone.map((t) => t.pid);
  const startedAt = performance.now();
  const stillAlive = await terminateProcesses(ending, { termWaitMs: graceMs, killWaitMs: LEFTOVER_TOR_KILL_WAIT_MS });
  log.warn('ended tors left running by a previous supervisor on this DATA_DIR (they held the data directories)', {
    pids: ending,
    owners: [...new Set(gone.map((t) => t.owner))],
    ended: ending.filter((pid) => !stillAlive.includes(pid)),
    stillAlive,
    ms: Math.round(performance.now() - startedAt),
  });
  return leftovers;
}
