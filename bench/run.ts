// `npm run bench`: runs the benchmarks, prints each figure next to its limit, and writes
// docs/performance.md. Select some with BENCH=name1,name2.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../shared/version.js';
import { benchIpcRoundTrip } from './ipc-roundtrip.js';
import { renderSection, type BenchSection } from './report.js';

const BENCHES: Record<string, () => Promise<BenchSection>> = {
  ipc: () => benchIpcRoundTrip(),
};

async function main(): Promise<void> {
  const selected = process.env.BENCH ? process.env.BENCH.split(',') : Object.keys(BENCHES);
  const sections: BenchSection[] = [];
  for (const name of selected) {
    const bench = BENCHES[name];
    if (!bench) throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
    process.stderr.write(`bench: ${name} …\n`);
    const s = await bench();
    process.stdout.write(renderSection(s) + '\n');
    sections.push(s);
  }
  const out = path.join(packageRoot(), 'docs', 'performance-bench.md');
  const header = [
    '# Benchmark results (generated)',
    '',
    `Command: \`npm run bench\`${process.env.BENCH ? ` with \`BENCH=${process.env.BENCH}\`` : ''}. Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}. Run at ${new Date().toISOString()}.`,
    '',
  ];
  fs.writeFileSync(out, [...header, ...sections.map(renderSection)].join('\n'));
  process.stderr.write(`bench: wrote ${path.relative(process.cwd(), out)}\n`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
