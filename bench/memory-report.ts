import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** What a worker preloaded with gc-on-signal.ts reports after a full garbage collection. */
export interface MemoryReport {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export function memoryReportFile(pid: number): string {
  return path.join(os.tmpdir(), `exitpool-bench-memory-${pid}.json`);
}

export class MemoryReportMissingError extends Error {
  constructor(pid: number) {
    super(`process ${pid} wrote no memory report (was it started with bench/gc-on-signal.js?)`);
    this.name = 'MemoryReportMissingError';
  }
}

/** Asks `pid` for a report (SIGUSR2) and waits for the file it writes. */
export async function requestMemoryReport(pid: number, timeoutMs = 5000): Promise<MemoryReport> {
  const file = memoryReportFile(pid);
  fs.rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    try {
      const report = JSON.parse(fs.readFileSync(file, 'utf8')) as MemoryReport;
      fs.rmSync(file, { force: true });
      return report;
    } catch {
      // not written (completely) yet
    }
  }
  throw new MemoryReportMissingError(pid);
}
