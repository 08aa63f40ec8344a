import { expect } from 'chai';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import '../support/fixtures/fuzz-runs.js';
import { parseSessionUsername } from '../../shared/api/session-username.js';
import { packageRoot, serviceVersion } from '../../shared/version.js';
import { runPython } from '../support/clients/python.js';

const PYTHON_CLIENT = path.join(packageRoot(), 'clients', 'python');

/**
 * The Python client (clients/python) with Debian's python3: its own pytest suite (which reads the
 * shared username vectors and test pages), mypy --strict and flake8 (python3-mypy,
 * python3-flake8), an sdist and a wheel that carry what they must, and usernames the service
 * reads back.
 */
describe('Python client (clients/python): its tests, its types, its packages, and usernames the service reads back', function () {
  this.timeout(180_000);

  it('passes its pytest suite (Debian python3 with its packages)', async () => {
    const r = await runPython(['-m', 'pytest', 'clients/python/tests', '-q', '-p', 'no:cacheprovider'], {}, undefined, 170_000);
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    const passed = Number(/(\d+) passed/.exec(r.stdout)?.[1] ?? 0);
    expect(passed).to.be.at.least(130);
    expect(r.stdout).to.not.match(/failed|error/);
  });

  it('is clean under mypy --strict (the package and its tests) and flake8', async () => {
    const mypy = await runPython(['-m', 'mypy'], {}, undefined, 170_000, PYTHON_CLIENT);
    expect(mypy.code, mypy.stdout + mypy.stderr).to.equal(0);
    expect(mypy.stdout).to.match(/^Success: no issues found in \d+ source files/m);
    expect(fs.readFileSync(path.join(PYTHON_CLIENT, 'pyproject.toml'), 'utf8'), 'strict, not a softer setting').to.match(/^\[tool\.mypy\]\nstrict = true$/m);
    const flake8 = await runPython(['-m', 'flake8', 'exitpool_client', 'tests'], {}, undefined, 60_000, PYTHON_CLIENT);
    expect(flake8.code, flake8.stdout + flake8.stderr).to.equal(0);
  });

  it('builds an sdist that carries its tests and their data, and a wheel with py.typed (python3 -m build, offline)', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-client-py-'));
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-client-src-'));
    try {
      // Built from a copy: the build writes its egg-info beside the sources.
      fs.cpSync(PYTHON_CLIENT, work, { recursive: true, dereference: true, filter: (src) => !/(__pycache__|\.egg-info|[/\\]build$|[/\\]dist$)/.test(src) });
      const r = await runPython(['-m', 'build', '--no-isolation', '--outdir', out, '.'], {}, undefined, 170_000, work);
      expect(r.code, r.stdout + r.stderr).to.equal(0);
      // setuptools names the sdist exitpool-client-… or (newer) exitpool_client-…
      const built = fs.readdirSync(out);
      const sdist = built.find((f) => f.endsWith('.tar.gz'));
      const wheel = built.find((f) => f.endsWith('.whl'));
      expect([sdist, wheel], built.join(' ')).to.not.include(undefined);
      const list = await runPython(
        ['-c', 'import sys, tarfile, zipfile; t = tarfile.open(sys.argv[1]); print("\\n".join(m.name.split("/", 1)[-1] for m in t.getmembers() if m.isfile())); print("\\n".join(zipfile.ZipFile(sys.argv[2]).namelist()))', path.join(out, sdist as string), path.join(out, wheel as string)],
      );
      expect(list.code, list.stderr).to.equal(0);
      const names = list.stdout.split('\n');
      for (const f of ['tests/conftest.py', 'tests/test_blocks.py', 'tests/fixtures/usernames.json', 'tests/fixtures/test-pages/pages.json', 'tests/fixtures/test-pages/pages/google-sorry.html', 'exitpool_client/py.typed', 'LICENSE']) {
        expect(names, `${f}, a regular file`).to.include(f);
      }
      expect(names).to.include('exitpool_client/py.typed');
      // The versions are kept in step (release/version-places.ts): the package's is the service's.
    expect(names, 'the dist-info of this version').to.include(`exitpool_client-${serviceVersion()}.dist-info/METADATA`);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
      fs.rmSync(work, { recursive: true, force: true });
    }
  });

  it('builds usernames that the service reads back as the same key and choices (property, one batch)', async () => {
    const cases = fc.sample(
      fc.record({
        key: fc.oneof(
          fc.string({ minLength: 1, maxLength: 30 }),
          fc.array(fc.constantFrom('a', 'country', 'cc', 'de', 'mode', 'session', 'sessid', 'city', 'london', '7', 'ttl', '%'), { minLength: 1, maxLength: 5 }).map((p) => p.join('-')),
        ),
        countries: fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { maxLength: 3 }),
        lifetime: fc.option(fc.integer({ min: 1, max: 86_400 }), { nil: undefined }),
        mode: fc.option(fc.constantFrom('sticky', 'rotating'), { nil: undefined }),
      }),
      200,
    );
    const r = await runPython(['test/support/python/client_scenario.py', 'usernames'], {}, JSON.stringify(cases));
    expect(r.code, r.stderr).to.equal(0);
    const usernames = JSON.parse(r.stdout) as string[];
    usernames.forEach((u, i) => {
      const c = cases[i] as (typeof cases)[number];
      const parsed = parseSessionUsername(u);
      expect(parsed.key, u).to.equal(c.key);
      expect(parsed.params.countries ?? [], u).to.deep.equal(c.countries);
      expect(parsed.params.lifetimeMs, u).to.equal(c.lifetime === undefined ? undefined : c.lifetime * 1000);
      if (c.mode !== undefined) expect(parsed.params.mode, u).to.equal(c.mode);
    });
  });
});
