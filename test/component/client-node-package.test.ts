import { expect } from 'chai';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { SUPPORTED_NODE, unsupportedNodeMessage } from '../../clients/node/src/node-version.js';
import { packageRoot } from '../../shared/version.js';

const run = promisify(execFile);
const ROOT = packageRoot();
const CLIENT = path.join(ROOT, 'clients', 'node');
const BIN = path.join(ROOT, 'node_modules', '.bin');

/** Runs a command with the repository's tools first on PATH; answers its output, or the failure's. */
async function sh(cmd: string, args: string[], cwd: string, extraEnv: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(cmd, args, { cwd, env: { ...process.env, PATH: `${BIN}:${process.env.PATH ?? ''}`, ...extraEnv }, maxBuffer: 16 * 2 ** 20, timeout: 170_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const f = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof f.code === 'number' ? f.code : 1, stdout: f.stdout ?? '', stderr: f.stderr ?? '' };
  }
}

/**
 * An older Node.js than the package supports: the machine's own Node when it is one (Debian's
 * or NodeSource's 20 here), else this Node told it is 20 (process.versions can be redefined).
 */
function olderNode(): { command: string; args: string[]; version: string } {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!fs.existsSync(candidate)) continue;
    const version = execFileSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
    if (unsupportedNodeMessage(version) !== null) return { command: candidate, args: [], version };
  }
  return { command: process.execPath, args: ['--import', 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.20.2"})'], version: '20.20.2' };
}

/**
 * `npm pack` of clients/node as a release would make it, installed where only undici is: the
 * prepack build ships dist/ with its types, the root entry type-checks under `tsc --strict`
 * without any other client library, it runs on the supported Node, and an older Node gets a
 * message that says why.
 */
describe('@exitpool/client as packed: builds on pack, installs with undici alone, types that need nothing else', function () {
  this.timeout(180_000);
  let work: string;
  let tarball: string;
  let files: string[];
  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-client-node-'));
    // From a copy without dist/: the pack itself must build it (prepack).
    const src = path.join(work, 'src');
    fs.cpSync(CLIENT, src, { recursive: true, filter: (p) => !/[/\\](dist|node_modules)$/.test(p) });
    // Its build tools and the libraries its types name, as a checkout's `npm ci` gives them.
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(src, 'node_modules'));
    const packed = await sh('npm', ['pack', '--json', '--pack-destination', work], src);
    expect(packed.code, packed.stderr).to.equal(0);
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    tarball = path.join(work, (info as { filename: string }).filename);
    files = (info as { files: { path: string }[] }).files.map((f) => f.path);
  });
  after(() => fs.rmSync(work, { recursive: true, force: true }));

  it('ships dist/ (JavaScript and types for every entry), README, LICENSE and package.json, and no sources', () => {
    for (const entry of ['index', 'got', 'axios', 'crawlee', 'agents']) {
      expect(files, entry).to.include(`dist/${entry}.js`);
      expect(files, entry).to.include(`dist/${entry}.d.ts`);
    }
    for (const f of ['README.md', 'LICENSE', 'package.json']) expect(files).to.include(f);
    expect(files.filter((f) => f.startsWith('src/') || f.endsWith('.tsbuildinfo'))).to.deep.equal([]);
  });

  it('installs with undici alone, type-checks its root entry under tsc --strict, runs, and refuses an older Node with a clear message', async () => {
    const app = path.join(work, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    // npm's cache first: the registry is asked only for what the cache lacks. A fresh machine's
    // cache holds the tarballs `npm ci` fetched by their locked URLs but not the registry's
    // metadata that resolving the client's version ranges needs, so `--offline` failed there
    // (ENOTCACHED). Optional peers (got, axios, Crawlee, the agents) are not installed.
    const installed = await sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--no-package-lock', tarball], app);
    expect(installed.code, installed.stderr).to.equal(0);
    const modules = fs.readdirSync(path.join(app, 'node_modules')).filter((d) => !d.startsWith('.'));
    expect(modules.sort()).to.deep.equal(['@exitpool', 'structured-headers', 'undici']);
    fs.writeFileSync(
      path.join(app, 'main.ts'),
      [
        "import { ExitpoolSession, defaultBanPolicy, parseProxyStatus, type Block } from '@exitpool/client';",
        "const s = new ExitpoolSession({ key: 'shop-1', token: 'tp_x', proxy: 'http://127.0.0.1:9251', api: 'http://127.0.0.1:8080', choices: { countries: ['de'] } });",
        "const b: Block | null = defaultBanPolicy({ status: 403, headers: { get: () => null }, body: '' });",
        "console.log(JSON.stringify([s.username, b?.kind, parseProxyStatus('exitpool; error=dns_error')?.error]));",
        'await s.close();',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2023', lib: ['ES2023'], module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: false, outDir: 'out', types: ['node'], typeRoots: [path.join(ROOT, 'node_modules', '@types')] },
        files: ['main.ts'],
      }),
    );
    const tsc = await sh('tsc', ['-p', 'tsconfig.json'], app);
    expect(tsc.code, tsc.stdout + tsc.stderr).to.equal(0);
    const ran = await sh(process.execPath, ['out/main.js'], app);
    expect(ran.code, ran.stderr).to.equal(0);
    expect(JSON.parse(ran.stdout)).to.deep.equal(['shop%2D1-country-de', 'blocked', 'dns_error']);
    const old = olderNode();
    const refused = await sh(old.command, [...old.args, 'out/main.js'], app);
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.include(`@exitpool/client needs Node.js ${SUPPORTED_NODE} or later; this is Node.js ${old.version}`);
  });
});
