/**
 * Process inspection for the tests, straight from /proc (the one liveness check): the service's worker processes
 * (told apart by the role variable the worker manager puts in their environment), liveness
 * that does not mistake a zombie for a live process, resident memory and open descriptors.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { readProcessStats } from '../../../supervisor/metrics/process-stats.js';
import { ROLE_ENV } from '../../../shared/ipc/protocol.js';
import { isProcessAlive } from '../../../shared/process/foreign-processes.js';

/** Direct children of `pid` (every thread's children list). */
export function childPids(pid: number): number[] {
  const out = new Set<number>();
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const task of tasks) {
    try {
      const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      for (const p of text.split(/\s+/)) if (p !== '') out.add(Number(p));
    } catch {
      // the thread ended while we looked
    }
  }
  return [...out].sort((a, b) => a - b);
}

/** The worker role from the process environment (`api`, `proxy`), or null (tor, or gone). */
export function processRole(pid: number): string | null {
  try {
    const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    const line = env.find((l) => l.startsWith(`${ROLE_ENV}=`));
    return line === undefined ? null : line.slice(ROLE_ENV.length + 1);
  } catch {
    return null;
  }
}

/** Alive and not a zombie (the testnet's own check), with one parameter so it can be passed to `filter`. */
export function isAlive(pid: number): boolean {
  return isProcessAlive(pid);
}

/** The scheduler state letter of /proc/<pid>/stat ('T' once SIGSTOPped), or null when gone. */
export function processState(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

export interface ServiceWorkers {
  api: number[];
  proxy: number[];
}

/** The live API and proxy worker processes of a service (children of its supervisor). */
export function serviceWorkers(servicePid: number): ServiceWorkers {
  const out: ServiceWorkers = { api: [], proxy: [] };
  for (const pid of childPids(servicePid)) {
    if (!isAlive(pid)) continue;
    const role = processRole(pid);
    if (role === 'api') out.api.push(pid);
    else if (role === 'proxy') out.proxy.push(pid);
  }
  return out;
}

/** Resident set size in bytes (VmRSS), or null when the process is gone. */
export function rssBytes(pid: number): number | null {
  return readProcessStats(pid)?.residentBytes ?? null;
}

export function openFileDescriptors(pid: number): number | null {
  return readProcessStats(pid)?.openFds ?? null;
}

/** The soft and hard RLIMIT_NOFILE of a process (from /proc/<pid>/limits). */
export function fileDescriptorLimit(pid: number): { soft: number; hard: number } {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
  if (!m) throw new Error(`no open-files limit in /proc/${pid}/limits`);
  const n = (s: string): number => (s === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(s));
  return { soft: n(m[1] as string), hard: n(m[2] as string) };
}

export class FileDescriptorLimitError extends Error {
  constructor(wanted: number, have: number, cause: string) {
    super(`need an open-files limit of ${wanted}, have ${have}, and could not raise it: ${cause}`);
    this.name = 'FileDescriptorLimitError';
  }
}

/**
 * Raises this process's RLIMIT_NOFILE (soft and hard) to at least `wanted` with prlimit(1);
 * children started afterwards (the service, its workers and tors, the test network) inherit it.
 * Raising the hard limit needs root (CAP_SYS_RESOURCE).
 */
export function ensureFileDescriptorLimit(wanted: number): { soft: number; hard: number } {
  const now = fileDescriptorLimit(process.pid);
  if (now.soft >= wanted) return now;
  const target = Math.max(wanted, now.hard);
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${target}:${target}`], { stdio: 'pipe' });
  } catch (e) {
    throw new FileDescriptorLimitError(wanted, now.soft, (e as Error).message);
  }
  const after = fileDescriptorLimit(process.pid);
  if (after.soft < wanted) throw new FileDescriptorLimitError(wanted, after.soft, 'prlimit had no effect');
  return after;
}

/** Sends a signal to one process by PID; false when it is already gone. */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** Polls until none of the PIDs is alive; returns those still alive at the deadline. */
export async function waitAllGone(pids: readonly number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = pids.filter(isAlive);
    if (alive.length === 0 || Date.now() > deadline) return alive;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The user name owning a process (from /proc/PID/status Uid and /etc/passwd). */
export function processUser(pid: number): string {
  const uid = /Uid:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.split(':')[2] === uid);
  return line?.split(':')[0] ?? `uid ${uid}`;
}
