/**
 * The Python client's wheel and sdist as a user gets them: their contents, each installed into a
 * clean venv of Debian's Python (with its system site packages: requests, httpx and Scrapy come
 * from Debian, since PyPI is not reachable here; pip never goes to an index), and the first
 * example of the README run with that install against the private network.
 */
import { expect } from 'chai';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEBIAN_PYTHON } from '../support/clients/python.js';
import { TEST_PROXY_TOKEN, withService, type RunningService } from '../support/fixtures/service.js';
import { artifactPath, releaseVersion } from '../support/release/artifacts.js';
import { firstExample, pointAtTestService } from '../support/release/readme-example.js';

/** The distribution's name as pip knows it. */
const DISTRIBUTION = 'exitpool-client';

/**
 * Runs before the README's example: its `TOKEN`, and the session's proxy addresses pointed at the
 * test service (the example relies on the defaults 127.0.0.1:9250/9251, which the test cannot
 * take on a shared machine).
 */
function prelude(svc: RunningService): string {
  return [
    'import functools, os',
    'import exitpool_client',
    'TOKEN = os.environ["EXITPOOL_TOKEN"]',
    `exitpool_client.ExitpoolSession = functools.partial(exitpool_client.ExitpoolSession, http_proxy="127.0.0.1:${svc.httpPort}", socks_proxy="127.0.0.1:${svc.socksPort}")`,
    '',
  ].join('\n');
}

function run(file: string, args: readonly string[], options: { cwd: string; env?: Record<string, string> }): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: options.cwd, env: { PATH: '/usr/bin:/bin', HOME: options.cwd, ...options.env }, timeout: 180_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

describe('release: the Python client packages', function () {
  this.timeout(300_000);
  const suite = withService({ POOL_SIZE: '2', PROXY_WORKERS: '1' });
  const version = releaseVersion();
  let work: string;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-python-'));
  });
  after(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('the wheel carries the package and its metadata at the release version', () => {
    const names = execFileSync(DEBIAN_PYTHON, ['-c', 'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))', artifactPath('wheel')], { encoding: 'utf8' }).trim().split('\n');
    expect(names).to.include('exitpool_client/__init__.py');
    expect(names).to.include(`exitpool_client-${version}.dist-info/METADATA`);
    expect(names.filter((n) => n.includes('tests/')), 'tests installed as a package').to.deep.equal([]);
  });

  it('the sdist carries the sources, pyproject.toml and the README', () => {
    const files = execFileSync('tar', ['-tzf', artifactPath('sdist')], { encoding: 'utf8' }).trim().split('\n');
    const top = files[0]?.split('/')[0] as string;
    expect(top).to.match(new RegExp(`^exitpool[-_]client-${version.replace(/\./g, '\\.')}$`));
    for (const file of ['pyproject.toml', 'README.md', 'PKG-INFO']) expect(files, file).to.include(`${top}/${file}`);
    // The package's sources, in a flat or a src/ layout.
    expect(files.some((f) => f.startsWith(`${top}/`) && f.endsWith('exitpool_client/__init__.py')), 'exitpool_client/__init__.py').to.equal(true);
  });

  for (const kind of ['wheel', 'sdist'] as const) {
    describe(`the ${kind}, installed`, () => {
      const venv = (): string => path.join(work, `venv-${kind}`);
      const python = (): string => path.join(venv(), 'bin', 'python');

      it("installs into a clean venv of Debian's Python, without an index", () => {
        execFileSync(DEBIAN_PYTHON, ['-m', 'venv', '--system-site-packages', venv()]);
        // An sdist is built with Debian's setuptools (no isolated build: it would need PyPI).
        const buildArgs = kind === 'sdist' ? ['--no-build-isolation'] : [];
        execFileSync(python(), ['-m', 'pip', 'install', '--no-index', '--disable-pip-version-check', '--quiet', ...buildArgs, artifactPath(kind)], { cwd: work, stdio: 'pipe' });
        const where = execFileSync(python(), ['-c', `import exitpool_client, importlib.metadata as m; print(exitpool_client.__file__); print(m.version("${DISTRIBUTION}"))`], { cwd: work, encoding: 'utf8' }).trim().split('\n');
        expect(where[0], 'imported from the venv, not the checkout').to.satisfy((f: string) => f.startsWith(`${venv()}/`));
        expect(where[1]).to.equal(version);
      });

      it("runs the README's first example against the private network", async () => {
        const svc = suite.svc;
        // The README as installed: the package's long description in its metadata.
        const readme = execFileSync(python(), ['-c', `import importlib.metadata as m; print(m.metadata("${DISTRIBUTION}").get_payload())`], { cwd: work, encoding: 'utf8' });
        const code = prelude(svc) + pointAtTestService(firstExample(readme, 'python'), { socksPort: svc.socksPort, httpPort: svc.httpPort, apiPort: svc.apiPort, siteUrl: svc.whoamiUrl });
        const file = path.join(work, `example-${kind}.py`);
        fs.writeFileSync(file, code);
        const result = await run(python(), [file], { cwd: work, env: { EXITPOOL_TOKEN: TEST_PROXY_TOKEN, PYTHONDONTWRITEBYTECODE: '1' } });
        expect(result.code, `${result.out}\nthe example as run:\n${code}`).to.equal(0);
        expect(result.out, code).to.match(/\b200\b/);
      });
    });
  }
});
