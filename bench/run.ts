// `npm run bench`: runs the benchmarks, prints each figure next to its limit, and writes
// docs/performance.md. Select some with BENCH=name1,name2.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../shared/version.js';
import { benchIpcRoundTrip } from './ipc-roundtrip.js';
import { benchPoolStart } from './pool-start.js';
import { renderSection, type BenchSection } from './report.js';

const BENCHES: Record<string, () => Promise<BenchSection>> = {
  ipc: () => benchIpcRoundTrip(),
  'pool-start': () => benchPoolStart(),
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
  writeSections(path.join(packageRoot(), 'docs', 'performance.md'), sections.map((sec, i) => [selected[i] as string, sec]));
}

/**
 * Replaces each benchmark's block in docs/performance.md (between its markers), appending
 * blocks seen for the first time, so running a subset updates only that subset.
 */
function writeSections(file: string, sections: [string, BenchSection][]): void {
  let doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Performance\n';
  const stamp = `Command: \`BENCH=NAME npm run bench\` (all: \`npm run bench\`). Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}. Run at ${new Date().toISOString()}.`;
  for (const [name, section] of sections) {
    const open = `<!-- bench:${name} -->`;
    const close = `<!-- /bench:${name} -->`;
    const block = `${open}\n${renderSection(section)}\n_${stamp.replace('NAME', name)}_\n${close}`;
    const a = doc.indexOf(open);
    const b = doc.indexOf(close);
    doc = a >= 0 && b > a ? doc.slice(0, a) + block + doc.slice(b + close.length) : `${doc.trimEnd()}\n\n${block}\n`;
  }
  fs.writeFileSync(file, doc);
  process.stderr.write(`bench: updated ${path.relative(process.cwd(), file)}\n`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
