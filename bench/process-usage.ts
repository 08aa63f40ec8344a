/**
 * What the benchmarks read about a process from /proc: resident memory, open file
 * descriptors, CPU time, and the open-files limit.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { cpuSeconds, openFds, residentBytes } from '../supervisor/metrics/process-stats.js';

/** Linux reports /proc/stat in clock ticks of USER_HZ, which is 100 on every Linux ABI Node runs on. */
const USER_HZ = 100;

export const rssBytes = residentBytes;
export const fdCount = openFds;

/** User plus system CPU time the process has used so far, in milliseconds. */
export function cpuMs(pid: number): number {
  return cpuSeconds(pid) * 1000;
}

/** CPU time of the whole machine so far (all cores), ms: busy and idle (idle includes iowait). */
export function machineCpuMs(): { busy: number; idle: number } {
  const fields = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1).map(Number);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: ((total - idle) * 1000) / USER_HZ, idle: (idle * 1000) / USER_HZ };
}

export interface FdLimit {
  soft: number;
  hard: number;
}

export function fdLimit(pid: number | 'self' = 'self'): FdLimit {
  const limits = fs.readFileSync(`/proc/${pid}/limits`, 'utf8');
  const m = /Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(limits);
  const parse = (v: string | undefined): number => (v === undefined || v === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(v));
  return { soft: parse(m?.[1]), hard: parse(m?.[2]) };
}

/**
 * Raises this process's soft open-files limit towards `wanted` (never beyond the hard limit,
 * which needs privileges to raise). Children forked afterwards inherit it. Node has no
 * setrlimit, so util-linux `prlimit` does it from outside.
 */
export function raiseFdLimit(wanted: number): FdLimit {
  const current = fdLimit();
  const target = Math.min(wanted, current.hard);
  if (current.soft >= target) return current;
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${target}:`], { stdio: 'ignore' });
  } catch {
    // Leave the limit as it is; the caller sizes its run by what fdLimit() reports.
  }
  return fdLimit();
}
