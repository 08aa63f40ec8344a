import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { isProcessAlive, processCommandLine, processStartTime, terminateProcesses as terminateForeign } from '../../shared/process/foreign-processes.js';
import { SPAWNED_PID_FILE } from './tor-process.js';

/** Marks a work dir as belonging to a live Node process; absent or dead owner = stale run. */
export const OWNER_FILE = 'owner.json';
/** Replaces OWNER_FILE when a run is stopped with keepWorkDir: the reaper leaves such a run alone. */
export const KEPT_RUN_FILE = 'stopped.json';
const TOR_PID_FILE = 'tor.pid';
const PID_FILE_SEARCH_DEPTH = 3;
const TERM_WAIT_MS = 3_000;
const KILL_WAIT_MS = 2_000;

export interface RunOwner {
  readonly pid: number;
  readonly startTime: string | undefined;
  readonly createdAt: string;
}

export function writeOwnerFile(workDir: string): void {
  const owner: RunOwner = { pid: process.pid, startTime: processStartTime(process.pid), createdAt: new Date().toISOString() };
  writeFileSync(path.join(workDir, OWNER_FILE), JSON.stringify(owner) + '\n');
}

/** Marks a stopped run as deliberately kept (logs and keys for inspection). */
export function markRunKept(workDir: string): void {
  renameSync(path.join(workDir, OWNER_FILE), path.join(workDir, KEPT_RUN_FILE));
}

export function readOwner(workDir: string): RunOwner | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path.join(workDir, OWNER_FILE), 'utf8'));
    if (typeof parsed !== 'object' || parsed === null || !('pid' in parsed) || typeof parsed.pid !== 'number') return undefined;
    const startTime = 'startTime' in parsed && typeof parsed.startTime === 'string' ? parsed.startTime : undefined;
    const createdAt = 'createdAt' in parsed && typeof parsed.createdAt === 'string' ? parsed.createdAt : '';
    return { pid: parsed.pid, startTime, createdAt };
  } catch {
    return undefined;
  }
}

/** A run whose owning Node process is still alive (this process included). */
export function isRunOwnerAlive(workDir: string): boolean {
  const owner = readOwner(workDir);
  return owner !== undefined && isProcessAlive(owner.pid, owner.startTime);
}

function findPidFiles(dir: string, depth: number): string[] {
  if (depth < 0) return [];
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findPidFiles(full, depth - 1));
    else if (entry.name === TOR_PID_FILE || entry.name === SPAWNED_PID_FILE) found.push(full);
  }
  return found;
}

/**
 * True only for a tor whose command line names a torrc inside workDir: a PID in a stale file
 * may since have been reused by any unrelated process, which must never be signalled.
 */
export function isTorOfRun(pid: number, workDir: string): boolean {
  const argv = processCommandLine(pid);
  if (!argv || argv.length === 0) return false;
  const program = path.basename(argv[0] ?? '');
  if (program !== 'tor') return false;
  const prefix = path.resolve(workDir) + path.sep;
  return argv.slice(1).some((arg) => path.isAbsolute(arg) && path.resolve(arg).startsWith(prefix));
}

/** PIDs of tors still running from a run's pid files. */
export function liveTorsOfRun(workDir: string): number[] {
  const pids = new Set<number>();
  for (const file of findPidFiles(workDir, PID_FILE_SEARCH_DEPTH)) {
    try {
      const pid = Number.parseInt(readFileSync(file, 'utf8').trim(), 10);
      if (Number.isInteger(pid) && pid > 1 && pid !== process.pid && isTorOfRun(pid, workDir)) pids.add(pid);
    } catch {
      // pid file vanished
    }
  }
  return [...pids];
}

/** SIGTERM, then SIGKILL for survivors, of processes that are not our children (polled via /proc). */
export async function terminateProcesses(pids: readonly number[], log: Logger): Promise<void> {
  const stubborn = await terminateForeign(pids, { termWaitMs: TERM_WAIT_MS, killWaitMs: KILL_WAIT_MS });
  if (stubborn.length > 0) log.error('processes survived SIGKILL', { pids: stubborn });
}

/** Stops every tor of a run and removes its directory. Returns the PIDs signalled. */
export async function reapRun(workDir: string, log: Logger): Promise<number[]> {
  const pids = liveTorsOfRun(workDir);
  if (pids.length > 0) log.warn('reaping tors of a stale test network', { workDir, pids });
  await terminateProcesses(pids, log);
  await rm(workDir, { recursive: true, force: true, maxRetries: 3 });
  return pids;
}

/**
 * Reaps runs under the testnet root (default <repo>/.testnet) left behind by a Node process
 * that no longer exists; runs of live processes (other people's concurrent test runs) are kept.
 */
export async function reapStaleRuns(root: string, log: Logger): Promise<{ runs: number; killed: number }> {
  if (!existsSync(root)) return { runs: 0, killed: 0 };
  let runs = 0;
  let killed = 0;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
    const dir = path.join(root, entry.name);
    if (!existsSync(path.join(dir, OWNER_FILE)) || isRunOwnerAlive(dir)) continue;
    killed += (await reapRun(dir, log)).length;
    runs += 1;
  }
  if (runs > 0) log.info('stale test networks reaped', { root, runs, killedTors: killed });
  return { runs, killed };
}
