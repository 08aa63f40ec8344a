/**
 * scripts/setup.sh and scripts/build.sh say what each long step does before it starts, one line
 * each (`[setup] apt: installing tor … (this can take a minute)`, `[build] compiling …`), so a
 * quiet minute is not mistaken for a hang. Both run here in a copy of the repository's scripts
 * with every tool they call replaced by a stub that records its call (nothing is installed or
 * compiled, and nothing outside the copy is written).
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Real tools the scripts need to run at all; everything else they call is a stub. */
const REAL_TOOLS = ['bash', 'dirname', 'grep', 'cat', 'mkdir'];

function which(tool: string): string {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
    if (fs.existsSync(path.join(dir, tool))) return path.join(dir, tool);
  }
  throw new Error(`${tool} not found`);
}

/** A copy of scripts/ in a fresh directory, and a PATH of stubs that write `RAN <tool> <args>` to stderr. */
function sandbox(stubs: Record<string, string>): { root: string; path: string } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-scripts-'));
  fs.cpSync(path.join(repo, 'scripts'), path.join(root, 'scripts'), { recursive: true });
  const bin = path.join(root, 'stub-bin');
  fs.mkdirSync(bin);
  for (const tool of REAL_TOOLS) fs.symlinkSync(which(tool), path.join(bin, tool));
  for (const [tool, body] of Object.entries(stubs)) {
    fs.writeFileSync(path.join(bin, tool), `#!${which('bash')}\necho "RAN ${tool} $*" >&2\n${body}\n`, { mode: 0o755 });
  }
  return { root, path: bin };
}

function run(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(which('bash'), [script], { cwd, env, timeout: 30_000 }, (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }));
  });
}

/** Each RAN line of a long step comes right after a line of the script's own, which names it. */
function expectAnnounced(stderr: string, prefix: string, longSteps: RegExp): string[] {
  const lines = stderr.split('\n').filter((l) => l !== '');
  const said: string[] = [];
  lines.forEach((line, i) => {
    if (!line.startsWith('RAN ') || !longSteps.test(line)) return;
    const before = lines[i - 1] ?? '';
    expect(before, `${line} is announced`).to.match(new RegExp(`^\\[${prefix}\\] `));
    said.push(before);
  });
  return said;
}

describe('set-up and build scripts: one line per step', function () {
  this.timeout(60_000);
  const roots: string[] = [];
  after(() => {
    for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  });

  it('setup.sh names npm ci and each apt step before it runs it, and the packages it installs', async () => {
    const box = sandbox({
      npm: 'exit 0',
      'apt-get': 'exit 0',
      // Not installed: every package is needed.
      dpkg: 'exit 1',
      id: 'echo 0',
      // policy-rc.d is written and removed through these: stubs keep /usr/sbin untouched.
      tee: 'cat >/dev/null',
      chmod: 'exit 0',
      rm: 'exit 0',
    });
    roots.push(box.root);
    fs.writeFileSync(path.join(box.root, 'package-lock.json'), '{}');
    const r = await run('scripts/setup.sh', box.root, { PATH: box.path, HOME: box.root });
    expect(r.code, r.stderr).to.equal(0);
    const said = expectAnnounced(r.stderr, 'setup', /^RAN (npm ci|apt-get)/);
    expect(said).to.have.length(3);
    expect(said[0]).to.match(/^\[setup\] npm: installing packages \(npm ci; this can take a minute\)$/);
    expect(said[1]).to.equal('[setup] apt: updating the package lists');
    expect(said[2]).to.match(/^\[setup\] apt: installing tor tor-geoipdb .*prometheus.* \(this can take a minute\)$/);
    const install = r.stderr.split('\n').find((l) => l.startsWith('RAN apt-get install')) ?? '';
    for (const pkg of ['tor', 'tor-geoipdb', 'gcc', 'curl', 'haproxy', 'chromium', 'redis-server', 'prometheus']) expect(install.split(' ')).to.include(pkg);
  });

  it('build.sh names each compile step before it runs it, and says when it is done', async () => {
    const box = sandbox({ npx: 'exit 0', rm: 'exit 0' });
    roots.push(box.root);
    fs.mkdirSync(path.join(box.root, 'node_modules'));
    fs.mkdirSync(path.join(box.root, 'dashboard'));
    fs.writeFileSync(path.join(box.root, 'dashboard', 'vite.config.ts'), '');
    const r = await run('scripts/build.sh', box.root, { PATH: box.path, HOME: box.root });
    expect(r.code, r.stderr).to.equal(0);
    const said = expectAnnounced(r.stderr, 'build', /^RAN npx (tsc|vite)/);
    expect(said).to.have.length(3);
    expect(said[0]).to.match(/^\[build\] compiling the service/);
    expect(said[2]).to.match(/^\[build\] bundling the dashboard/);
    expect(r.stderr.trimEnd().split('\n').at(-1)).to.match(/^\[build\] done in \d+ s$/);
  });
});
