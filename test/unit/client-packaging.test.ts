import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { SUPPORTED_NODE } from '../../clients/node/src/node-version.js';
import { packageRoot } from '../../shared/version.js';

interface NodeClientPackage {
  name: string;
  version: string;
  type: string;
  description: string;
  license: string;
  keywords: string[];
  engines: { node: string };
  exports: Record<string, { types: string; import: string } | string>;
  files: string[];
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional: boolean }>;
}

/** The clients are versioned with the service: one release number for all three, one source each. */
describe('client packages: versioned with the service, complete, ready to publish', () => {
  const root = packageRoot();
  const service = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'clients', 'node', 'package.json'), 'utf8')) as NodeClientPackage;

  it('@exitpool/client: the service’s version, the Node it needs, and a build on pack', () => {
    expect(pkg.version).to.equal(service);
    expect(pkg.type).to.equal('module');
    expect(pkg.engines.node, 'the floor the entry points check').to.equal(`>=${SUPPORTED_NODE}`);
    expect(pkg.scripts.prepack).to.equal('npm run build');
    expect(pkg.scripts.build).to.equal('tsc -p tsconfig.json');
    expect(pkg.files).to.include('dist');
    for (const field of ['description', 'license'] as const) expect(pkg[field], field).to.be.a('string').and.not.equal('');
    expect(pkg.keywords.length).to.be.greaterThan(3);
  });

  it('@exitpool/client: a root entry that needs undici only, and a subpath per other client', () => {
    expect(pkg.exports['.']).to.deep.equal({ types: './dist/index.d.ts', import: './dist/index.js' });
    for (const sub of ['got', 'axios', 'crawlee', 'agents']) expect(pkg.exports[`./${sub}`], sub).to.deep.equal({ types: `./dist/${sub}.d.ts`, import: `./dist/${sub}.js` });
    expect(pkg.dependencies).to.deep.equal({ 'structured-headers': '^2.1.0' });
    expect(Object.keys(pkg.peerDependencies).sort()).to.deep.equal(['@crawlee/core', 'axios', 'got', 'http-proxy-agent', 'https-proxy-agent', 'socks-proxy-agent', 'undici']);
    expect(Object.keys(pkg.peerDependenciesMeta).sort(), 'every peer but undici optional').to.deep.equal(['@crawlee/core', 'axios', 'got', 'http-proxy-agent', 'https-proxy-agent', 'socks-proxy-agent']);
    // The root entry's modules import no optional peer (their .d.ts would need it).
    const rootModules = ['index', 'exitpool-session', 'exitpool-api', 'block-detection', 'challenge-signatures', 'proxy-status', 'errors', 'report-domain', 'username', 'node-version', 'failure-kind'];
    for (const m of rootModules) {
      const source = fs.readFileSync(path.join(root, 'clients', 'node', 'src', `${m}.ts`), 'utf8');
      const imported = [...source.matchAll(/from '([^.][^']*)'/g)].map((x) => x[1]);
      expect(imported.filter((i) => i !== 'undici' && i !== 'structured-headers'), m).to.deep.equal([]);
    }
  });

  it('exitpool-client (Python): one version source, the service’s, and complete metadata', () => {
    const pyproject = fs.readFileSync(path.join(root, 'clients', 'python', 'pyproject.toml'), 'utf8');
    expect(pyproject).to.match(/^dynamic = \["version"\]$/m);
    expect(pyproject).to.match(/^version = \{ attr = "exitpool_client.__version__" \}$/m);
    expect(pyproject).to.not.match(/^version = "/m);
    const init = fs.readFileSync(path.join(root, 'clients', 'python', 'exitpool_client', '__init__.py'), 'utf8');
    expect(/^__version__ = "([^"]+)"$/m.exec(init)?.[1]).to.equal(service);
    for (const field of ['description', 'readme', 'license', 'requires-python', 'authors', 'keywords', 'classifiers']) expect(pyproject, field).to.match(new RegExp(`^${field} = `, 'm'));
    expect(pyproject).to.include('"Typing :: Typed"');
    expect(fs.existsSync(path.join(root, 'clients', 'python', 'exitpool_client', 'py.typed'))).to.equal(true);
  });

  it('both READMEs start with the install command', () => {
    const node = fs.readFileSync(path.join(root, 'clients', 'node', 'README.md'), 'utf8');
    const python = fs.readFileSync(path.join(root, 'clients', 'python', 'README.md'), 'utf8');
    expect(/```sh\n([^\n]*)/.exec(node)?.[1]).to.match(/^npm install @exitpool\/client undici$/);
    expect(/```sh\n([^\n]*)/.exec(python)?.[1]).to.match(/^pip install 'exitpool-client\[/);
    expect(node.indexOf('```sh'), 'before any other block').to.equal(node.indexOf('```'));
    expect(python.indexOf('```sh')).to.equal(python.indexOf('```'));
  });

  it('ships no compiled Python: no .pyc is tracked, and git ignores the ones a run leaves', () => {
    const git = (...args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8' });
    expect(git('ls-files', '--', 'clients').split('\n').filter((f) => /__pycache__|\.pyc$/.test(f))).to.deep.equal([]);
    const leftovers = ['clients/python/exitpool_client/__pycache__/session.cpython-311.pyc', 'clients/python/tests/__pycache__/conftest.cpython-311-pytest-7.2.1.pyc', 'clients/python/exitpool_client/blocks.pyc'];
    expect(git('check-ignore', '--no-index', ...leftovers).trim().split('\n')).to.deep.equal(leftovers);
  });
});
