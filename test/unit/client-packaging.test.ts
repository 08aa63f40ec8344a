import { expect } from 'chai';
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
    expect(Object.keys(pkg.peerDependencies).sort()).to.deep.equal(['@crawlee/core', 'axios', 'got', 'socks-proxy-agent', 'undici']);
    expect(Object.keys(pkg.peerDependenciesMeta).sort()).to.deep.equal(['@crawlee/core', 'axios', 'got', 'socks-proxy-agent']);
    expect(pkg.license).to.equal('MIT');
  });

  it('exitpool-client (Python) has the service’s version in pyproject.toml and in the module', () => {
    const pyproject = fs.readFileSync(path.join(root, 'clients', 'python', 'pyproject.toml'), 'utf8');
    expect(/^version = "([^"]+)"$/m.exec(pyproject)?.[1]).to.equal(service);
    const init = fs.readFileSync(path.join(root, 'clients', 'python', 'exitpool_client', '__init__.py'), 'utf8');
    expect(/^__version__ = "([^"]+)"$/m.exec(init)?.[1]).to.equal(service);
  });
});
