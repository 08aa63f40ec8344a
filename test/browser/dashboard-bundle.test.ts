import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

/**
 * The dashboard's initial JavaScript budget (issue 8: at most 250 KB gzipped): the entry
 * script of the built index.html, the chunks it preloads, and everything they import
 * statically. Lazily loaded views (the Timeline with uPlot) are not part of it.
 */
const BUDGET_BYTES = 250 * 1024;
const DASHBOARD_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dashboard');

/** Specifiers of static `import … from "x"`, `import "x"` and `export … from "x"` (not `import("x")`). */
function staticImports(js: string): string[] {
  const found: string[] = [];
  const re = /(?:^|[;\s}])(?:import|export)\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']/g;
  for (const m of js.matchAll(re)) found.push(m[1] as string);
  return found;
}

function initialJavaScript(dir: string): string[] {
  const html = fs.readFileSync(path.join(dir, 'index.html'), 'utf8');
  const roots = [
    ...[...html.matchAll(/<script[^>]*type="module"[^>]*src="([^"]+)"/g)].map((m) => m[1] as string),
    ...[...html.matchAll(/<link[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)].map((m) => m[1] as string),
  ].map((src) => path.join(dir, src.replace(/^\//, '')));
  const seen = new Set<string>();
  const queue = [...roots];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of staticImports(fs.readFileSync(file, 'utf8'))) {
      if (spec.startsWith('.') || spec.startsWith('/')) {
        queue.push(spec.startsWith('/') ? path.join(dir, spec.slice(1)) : path.resolve(path.dirname(file), spec));
      }
    }
  }
  return [...seen];
}

describe('dashboard bundle', () => {
  it('finds static imports but not dynamic ones', () => {
    expect(staticImports('import{a as b}from"./x-1.js";import"./y.js";const t=()=>import("./lazy.js");export{c}from"./z.js"')).to.deep.equal([
      './x-1.js',
      './y.js',
      './z.js',
    ]);
  });

  it('keeps the initial JavaScript within 250 KB gzipped', function () {
    if (!fs.existsSync(path.join(DASHBOARD_DIR, 'index.html'))) throw new Error(`the dashboard is not built (${DASHBOARD_DIR}): run npm run build`);
    const files = initialJavaScript(DASHBOARD_DIR);
    expect(files.length).to.be.greaterThan(0);
    let raw = 0;
    let gzipped = 0;
    for (const f of files) {
      const body = fs.readFileSync(f);
      raw += body.length;
      gzipped += zlib.gzipSync(body, { level: 9 }).length;
    }
    const lazy = fs.readdirSync(path.join(DASHBOARD_DIR, 'assets')).filter((f) => f.endsWith('.js') && !files.includes(path.join(DASHBOARD_DIR, 'assets', f)));
    // The figure recorded in docs/performance.md ("Dashboard bundle").
    console.log(`      initial JS: ${files.length} file(s), ${(raw / 1024).toFixed(1)} KiB raw, ${(gzipped / 1024).toFixed(1)} KiB gzipped; lazy chunks: ${lazy.join(', ')}`);
    expect(gzipped).to.be.at.most(BUDGET_BYTES);
    expect(lazy.some((f) => f.startsWith('TimelineView')), 'the Timeline (uPlot) is a lazy chunk').to.equal(true);
  });
});
