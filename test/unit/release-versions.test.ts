/**
 * One release version everywhere (release/version-places.ts): the repository's places agree,
 * the sync rewrites each of them and nothing else, and refuses before writing when a place is
 * gone.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ReleaseError } from '../../release/release-error.js';
import { bumpVersion, checkVersions, compareVersions, readVersions, versionPlaces, writeVersion } from '../../release/version-places.js';
import { packageRoot } from '../../shared/version.js';

/** A copy of every file that names the version, in a temporary directory. */
function copyOfPlaces(): string {
  const root = packageRoot();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-versions-'));
  for (const place of versionPlaces(root)) {
    const from = path.join(root, place.file);
    if (!fs.existsSync(from)) continue;
    fs.mkdirSync(path.dirname(path.join(dir, place.file)), { recursive: true });
    fs.copyFileSync(from, path.join(dir, place.file));
  }
  return dir;
}

function releaseErrorCode(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof ReleaseError) return e.code;
    throw e;
  }
  return 'no error';
}

describe('release: one version in every place', () => {
  const dirs: string[] = [];
  const scratch = (): string => {
    const dir = copyOfPlaces();
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("every place in the repository names package.json's version", () => {
    const root = packageRoot();
    const version = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
    expect(checkVersions(root)).to.equal(version);
  });

  it('finds the service, both clients, the image tag, the manifests, compose and the README', () => {
    const files = new Set(readVersions(packageRoot()).map((f) => f.file));
    for (const file of [
      'package.json',
      'package-lock.json',
      'clients/node/package.json',
      'Dockerfile',
      'compose.yml',
      'deploy/compose/compose.yaml',
      'deploy/kubernetes/exitpool.yaml',
      'deploy/kubernetes/README.md',
      'README.md',
      'docs/openapi.yaml',
    ]) {
      expect(files, file).to.include(file);
    }
    expect([...files].some((f) => f.startsWith('clients/python/')), 'the Python client').to.equal(true);
  });

  it('writes a new version into every place, and only the version', () => {
    const dir = scratch();
    const before = new Map(versionPlaces(dir).map((p) => [p.file, fs.readFileSync(path.join(dir, p.file), 'utf8')] as const).filter(([f]) => fs.existsSync(path.join(dir, f))));
    const old = checkVersions(dir);
    const changed = writeVersion(dir, '41.42.43');
    expect(checkVersions(dir)).to.equal('41.42.43');
    expect(readVersions(dir).every((f) => f.version === '41.42.43')).to.equal(true);
    for (const [file, text] of before) {
      const now = fs.readFileSync(path.join(dir, file), 'utf8');
      // Put the old version back where the new one went: the rest of the file is untouched.
      expect(now.split('41.42.43').join(old), file).to.equal(text);
      expect(changed.includes(file), `${file} reported as changed`).to.equal(now !== text);
    }
    // npm's own layout of the JSON files is kept (two spaces, a final newline).
    expect(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).to.match(/^\{\n {2}"name": "exitpool",\n {2}"version": "41\.42\.43",\n[\s\S]*\}\n$/);
  });

  it('refuses a place that no longer names a version, before writing anything', () => {
    const dir = scratch();
    const compose = path.join(dir, 'compose.yml');
    fs.writeFileSync(compose, fs.readFileSync(compose, 'utf8').replace(/image: .*/, 'image: exitpool:latest'));
    const manifest = fs.readFileSync(path.join(dir, 'package.json'), 'utf8');
    expect(releaseErrorCode(() => writeVersion(dir, '9.9.9'))).to.equal('place-missing');
    expect(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).to.equal(manifest);
  });

  it('refuses a place that names another version, and says which', () => {
    const dir = scratch();
    const kube = path.join(dir, 'deploy/kubernetes/exitpool.yaml');
    fs.writeFileSync(kube, fs.readFileSync(kube, 'utf8').replace(/(image: \S+:)\d+\.\d+\.\d+/, '$17.7.7'));
    try {
      checkVersions(dir);
      expect.fail('versions that differ were accepted');
    } catch (e) {
      expect(e).to.be.instanceOf(ReleaseError);
      expect((e as ReleaseError).code).to.equal('versions-differ');
      expect((e as ReleaseError).message).to.include('deploy/kubernetes/exitpool.yaml').and.include('7.7.7');
    }
  });

  it('refuses versions that are not X.Y.Z', () => {
    const dir = scratch();
    for (const bad of ['1.2', 'v1.2.3', '1.2.3-rc.1', '01.2.3', '1.2.3 ', '']) {
      expect(releaseErrorCode(() => writeVersion(dir, bad)), JSON.stringify(bad)).to.equal('bad-version');
    }
  });

  it('bumps and compares as semver does', () => {
    expect(bumpVersion('0.1.0', 'minor')).to.equal('0.2.0');
    expect(bumpVersion('0.2.7', 'minor')).to.equal('0.3.0');
    expect(bumpVersion('0.2.7', 'patch')).to.equal('0.2.8');
    expect(bumpVersion('0.2.7', 'major')).to.equal('1.0.0');
    const version = fc.tuple(fc.nat(50), fc.nat(50), fc.nat(50)).map(([a, b, c]) => `${a}.${b}.${c}`);
    fc.assert(
      fc.property(version, fc.constantFrom('major', 'minor', 'patch') as fc.Arbitrary<'major' | 'minor' | 'patch'>, (v, part) => compareVersions(bumpVersion(v, part), v) > 0),
    );
    fc.assert(fc.property(version, version, (a, b) => Math.sign(compareVersions(a, b)) === -Math.sign(compareVersions(b, a))));
  });
});
