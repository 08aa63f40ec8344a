/**
 * What a process looks like from /proc (Linux): resident memory, CPU time, open descriptors.
 * /metrics reads the workers' at scrape time, so the workers spend nothing on it; the benchmarks
 * and the fault tests read their processes through the same functions.
 */
import fs from 'node:fs';

export interface ProcessStats {
  residentBytes: number;
  /** User plus system CPU time so far. */
  cpuSeconds: number;
  openFds: number;
}

/** Linux reports utime/stime in clock ticks of USER_HZ, which is 100 on every Linux ABI Node runs on. */
const USER_HZ = 100;

/** VmRSS in bytes. Throws when the process is gone. */
export function residentBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** User plus system CPU time in seconds. Throws when the process is gone. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces and parentheses: count fields after its closing ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

/** Open file descriptors. Throws when the process is gone. */
export function openFds(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

/** All three, or null when the process is gone (or there is no /proc). */
export function readProcessStats(pid: number): ProcessStats | null {
  try {
    return { residentBytes: residentBytes(pid), cpuSeconds: cpuSeconds(pid), openFds: openFds(pid) };
  } catch {
    return null;
  }
}
