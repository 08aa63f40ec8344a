import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { DEBIAN_PYTHON } from '../support/clients/python.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

interface RunnableBlock {
  file: string;
  line: number;
  lang: 'sh' | 'js' | 'python';
  code: string;
}

/** Fenced blocks whose info string is `sh runnable`, `js runnable` or `python runnable`. */
export function runnableBlocks(file: string): RunnableBlock[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const blocks: RunnableBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^```(sh|js|python) runnable\s*$/.exec(lines[i] as string);
    if (!m) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !(lines[end] as string).startsWith('```')) end++;
    blocks.push({ file: path.relative(packageRoot(), file), line: start, lang: m[1] as RunnableBlock['lang'], code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

function run(block: RunnableBlock, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  const [cmd, args] =
    block.lang === 'sh'
      ? ['bash', ['-euo', 'pipefail', '-c', block.code]]
      : block.lang === 'js'
        ? [process.execPath, ['--input-type=module', '-e', block.code]]
        : [DEBIAN_PYTHON, ['-c', block.code]];
  return new Promise((resolve) => {
    execFile(cmd as string, args as string[], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

const docs = [path.join(packageRoot(), 'README.md'), ...fs.readdirSync(path.join(packageRoot(), 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join(packageRoot(), 'docs', f))];
const blocks = docs.flatMap(runnableBlocks);

/** Every block marked runnable in README.md and docs/ runs against the private network. */
describe('runnable documentation', function () {
  this.timeout(300_000);
  let svc: RunningService;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    svc = await startService({ POOL_SIZE: '3' });
    await svc.waitReady(3);
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TOKEN: TEST_PROXY_TOKEN,
      ADMIN_PASSWORD: TEST_ADMIN_PASSWORD,
      JWT: await svc.login(),
      SOCKS: `127.0.0.1:${svc.socksPort}`,
      HTTP: `127.0.0.1:${svc.httpPort}`,
      API: `http://127.0.0.1:${svc.apiPort}`,
      URL: svc.whoamiUrl,
      // The Python client as a user who installed it would import it (Debian's python3 has requests).
      PYTHONPATH: path.join(packageRoot(), 'clients', 'python'),
    };
  });
  after(async () => {
    await svc?.stop();
  });

  it('finds the runnable blocks (README walk-through, Node and Python clients)', () => {
    expect(blocks.filter((b) => b.file === 'README.md').map((b) => b.lang)).to.include.members(['sh', 'js', 'python']);
  });

  it('runs an example of every client (Node: fetch, got both ways, axios, Crawlee; Python: requests, httpx, Scrapy)', () => {
    const readme = blocks.filter((b) => b.file === 'README.md').map((b) => b.code);
    for (const call of ['s.fetch(', 'gotThrough(', 'gotThroughHttpProxy(', 'axiosThrough(', 'pool.wrap(', 'requests_session(', 'httpx_client(', 'httpx_async_client(', 'ExitpoolMiddleware']) {
      expect(readme.some((code) => code.includes(call)), call).to.equal(true);
    }
  });

  for (const block of blocks) {
    it(`${block.file}:${block.line} (${block.lang}) runs`, async () => {
      const r = await run(block, env);
      expect(r.code, r.out).to.equal(0);
    });
  }
});
