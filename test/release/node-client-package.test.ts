/**
 * The Node client's npm tarball as a scraper's project gets it: its contents, `npm install` into
 * a clean project (npm brings the undici peer), and the first example of the README the package
 * ships, run against the service on the private network.
 */
import { expect } from 'chai';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { artifactPath, releaseVersion } from '../support/release/artifacts.js';
import { firstExample, pointAtTestService } from '../support/release/readme-example.js';

describe('release: the Node client package', function () {
  this.timeout(300_000);
  const suite = withService({ POOL_SIZE: '2', PROXY_WORKERS: '1' });
  const version = releaseVersion();
  let project: string;
  let installed: string;
  // A user's shell, on the Node this test runs on (the client supports it; the machine's may be
  // older), with the machine's npm settings (registry, certificates, cache).
  const userEnv = { ...process.env, PATH: [path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(':') };

  before(() => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-client-project-'));
    installed = path.join(project, 'node_modules', '@exitpool', 'client');
  });
  after(() => {
    if (project) fs.rmSync(project, { recursive: true, force: true });
  });

  it('packs its compiled code, its types and its README', () => {
    const files = execFileSync('tar', ['-tzf', artifactPath('nodeClient')], { encoding: 'utf8' }).trim().split('\n');
    for (const file of ['package/package.json', 'package/README.md', 'package/dist/index.js', 'package/dist/index.d.ts']) {
      expect(files, file).to.include(file);
    }
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', artifactPath('nodeClient'), 'package/package.json'], { encoding: 'utf8' })) as { name: string; version: string };
    expect(manifest).to.include({ name: '@exitpool/client', version });
  });

  it('installs into a clean npm project', () => {
    fs.writeFileSync(path.join(project, 'package.json'), `${JSON.stringify({ name: 'scraper', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`);
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', artifactPath('nodeClient')], { cwd: project, env: userEnv, stdio: 'pipe' });
    expect((JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')) as { version: string }).version).to.equal(version);
    expect(fs.existsSync(path.join(project, 'node_modules', 'undici')), 'npm installs the undici peer').to.equal(true);
  });

  it("runs the first example of the README it ships against the private network", async () => {
    const svc = suite.svc;
    const readme = fs.readFileSync(path.join(installed, 'README.md'), 'utf8');
    const code = pointAtTestService(firstExample(readme, 'js'), { socksPort: svc.socksPort, httpPort: svc.httpPort, apiPort: svc.apiPort, siteUrl: svc.whoamiUrl });
    fs.writeFileSync(path.join(project, 'example.mjs'), code);
    const result = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, ['example.mjs'], { cwd: project, env: { ...userEnv, EXITPOOL_TOKEN: TEST_PROXY_TOKEN }, timeout: 120_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
      });
    });
    expect(result.code, `${result.out}\nthe example as run:\n${code}`).to.equal(0);
    // The README's example prints the page's status; the site answered through an exit.
    expect(result.out, code).to.match(/\b200\b/);
  });
});
