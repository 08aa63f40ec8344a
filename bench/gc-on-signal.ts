// Preloaded into benchmark worker processes (`--expose-gc --import`). On SIGUSR2 it runs a
// full garbage collection and writes the process's memory figures to
// memoryReportFile(pid), so a reading from outside counts live objects, not garbage that
// happens to be still uncollected.
import fs from 'node:fs';
import { memoryReportFile, type MemoryReport } from './memory-report.js';

process.on('SIGUSR2', () => {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  const report: MemoryReport = { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers };
  fs.writeFileSync(memoryReportFile(process.pid), JSON.stringify(report));
});
