/**
 * What /metrics reports about a worker process, read from /proc at scrape time (Linux), so the
 * workers spend nothing on it. Elsewhere, or for a process that is gone, there is nothing to read.
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

export function readProcessStats(pid: number): ProcessStats | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: count fields after its closing ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      residentBytes: Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024,
      cpuSeconds: (Number(fields[11]) + Number(fields[12])) / USER_HZ,
      openFds: fs.readdirSync(`/proc/${pid}/fd`).length,
    };
  } catch {
    return null;
  }
}
