import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';

/** The clients are versioned with the service: one release number for all three. */
describe('client packages: versioned with the service, ready to publish', () => {
  const root = packageRoot();
  const service = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;

  it('@exitpool/client has the service’s version, an ESM entry with types, and its peers optional but undici', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'clients', 'node', 'package.json'), 'utf8')) as {
      version: string;
      type: string;
      exports: Record<string, { types: string; import: string }>;
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional: boolean }>;
      license: string;
    };
    expect(pkg.version).to.equal(service);
    expect(pkg.type).to.equal('module');
    expect(pkg.exports['.']).to.deep.equal({ types: './dist/index.d.ts', import: './dist/index.js' });
    expect(Object.keys(pkg.peerDependencies).sort()).to.deep.equal(['@crawlee/core', 'axios', 'got', 'http-proxy-agent', 'https-proxy-agent', 'socks-proxy-agent', 'undici']);
    expect(Object.keys(pkg.peerDependenciesMeta).sort()).to.deep.equal(['@crawlee/core', 'axios', 'got', 'http-proxy-agent', 'https-proxy-agent', 'socks-proxy-agent']);
    expect(pkg.license).to.equal('MIT');
  });

  it('exitpool-client (Python) has the service’s version in pyproject.toml and in the module', () => {
    const pyproject = fs.readFileSync(path.join(root, 'clients', 'python', 'pyproject.toml'), 'utf8');
    expect(/^version = "([^"]+)"$/m.exec(pyproject)?.[1]).to.equal(service);
    const init = fs.readFileSync(path.join(root, 'clients', 'python', 'exitpool_client', '__init__.py'), 'utf8');
    expect(/^__version__ = "([^"]+)"$/m.exec(init)?.[1]).to.equal(service);
  });

  it('ships no compiled Python: no .pyc is tracked, and git ignores the ones a run leaves', () => {
    const git = (...args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8' });
    expect(git('ls-files', '--', 'clients').split('\n').filter((f) => /__pycache__|\.pyc$/.test(f))).to.deep.equal([]);
    const leftovers = ['clients/python/exitpool_client/__pycache__/session.cpython-311.pyc', 'clients/python/tests/__pycache__/conftest.cpython-311-pytest-7.2.1.pyc', 'clients/python/exitpool_client/blocks.pyc'];
    expect(git('check-ignore', '--no-index', ...leftovers).trim().split('\n')).to.deep.equal(leftovers);
  });
});
