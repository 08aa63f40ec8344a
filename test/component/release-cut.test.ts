/**
 * `npm run release:cut` (release/cut.ts) in temporary clones of this repository, never in the
 * checkout itself: the release commit and tag it makes, and each refusal leaving the clone as
 * it was.
 */
import { expect } from 'chai';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cutRelease } from '../../release/cut.js';
import { ReleaseError } from '../../release/release-error.js';
import { bumpVersion, checkVersions, versionPlaces } from '../../release/version-places.js';
import { packageRoot } from '../../shared/version.js';

const CUT_CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'release', 'cut.js');
const RELEASE_DAY = '2026-11-25';

describe('release: the cut, in a temporary clone', function () {
  this.timeout(60_000);
  let home: string;
  // Whoever runs the tests, the clone's commits have an author, and no user configuration applies.
  const gitEnv = (): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'Release Check',
    GIT_AUTHOR_EMAIL: 'release-check@localhost',
    GIT_COMMITTER_NAME: 'Release Check',
    GIT_COMMITTER_EMAIL: 'release-check@localhost',
  });
  const clones: string[] = [];
  const git = (dir: string, ...args: string[]): string => execFileSync('git', args, { cwd: dir, env: gitEnv(), encoding: 'utf8' }).trim();

  /** A clone of this repository at its HEAD, with one new CHANGELOG entry committed. */
  function clone(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-cut-'));
    clones.push(dir);
    const root = packageRoot();
    git(root, 'clone', '--quiet', '--no-tags', '--shared', root, dir);
    git(dir, 'checkout', '--quiet', '--detach', git(root, 'rev-parse', 'HEAD'));
    // Whatever the repository's Unreleased section holds today, the clone has one entry to release.
    const changelog = path.join(dir, 'CHANGELOG.md');
    fs.writeFileSync(changelog, fs.readFileSync(changelog, 'utf8').replace(/^## Unreleased[ \t]*\n/m, '## Unreleased\n\n- An entry for the release check.\n'));
    git(dir, 'commit', '--quiet', '-am', 'CHANGELOG: an entry to release');
    return dir;
  }

  /** The refusal's code; the clone's HEAD, tags and work tree must be as they were. */
  function refusal(dir: string, target: string): string {
    const head = git(dir, 'rev-parse', 'HEAD');
    const tags = git(dir, 'tag', '--list');
    const status = git(dir, 'status', '--porcelain');
    let code = 'no refusal';
    try {
      cutRelease(dir, { target, date: RELEASE_DAY });
    } catch (e) {
      if (!(e instanceof ReleaseError)) throw e;
      code = e.code;
    }
    expect(git(dir, 'rev-parse', 'HEAD'), 'HEAD after a refusal').to.equal(head);
    expect(git(dir, 'tag', '--list'), 'tags after a refusal').to.equal(tags);
    expect(git(dir, 'status', '--porcelain'), 'work tree after a refusal').to.equal(status);
    return code;
  }

  before(() => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-cut-home-'));
  });
  after(() => {
    for (const dir of [...clones, home]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('commits the new version everywhere with the dated CHANGELOG section, and tags it', () => {
    const dir = clone();
    const before = checkVersions(dir);
    const next = bumpVersion(before, 'minor');
    const parent = git(dir, 'rev-parse', 'HEAD');
    const run = spawnSync(process.execPath, [CUT_CLI, '--date', RELEASE_DAY], { cwd: dir, env: gitEnv(), encoding: 'utf8' });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout).to.include(`release ${next}`);
    // One commit on top, tagged (annotated), and nothing left uncommitted.
    expect(git(dir, 'rev-parse', 'HEAD~1')).to.equal(parent);
    expect(git(dir, 'log', '-1', '--format=%s')).to.equal(`Release ${next}`);
    expect(git(dir, 'cat-file', '-t', `v${next}`)).to.equal('tag');
    expect(git(dir, 'rev-parse', `v${next}^{commit}`)).to.equal(git(dir, 'rev-parse', 'HEAD'));
    expect(git(dir, 'status', '--porcelain')).to.equal('');
    // Every version place names the new version; the commit touched those files and the CHANGELOG only.
    expect(checkVersions(dir)).to.equal(next);
    const changed = git(dir, 'show', '--name-only', '--format=', 'HEAD').split('\n').sort();
    const places = new Set(versionPlaces(dir).map((p) => p.file));
    for (const file of changed) expect(file === 'CHANGELOG.md' || places.has(file), file).to.equal(true);
    expect(changed).to.include.members(['CHANGELOG.md', 'package.json', 'clients/node/package.json', 'deploy/kubernetes/exitpool.yaml']);
    const changelog = fs.readFileSync(path.join(dir, 'CHANGELOG.md'), 'utf8');
    expect(changelog).to.include(`## Unreleased\n\n## ${next} — ${RELEASE_DAY}\n\n- An entry for the release check.\n`);
    // A second cut has nothing to release.
    expect(refusal(dir, 'patch')).to.equal('empty-unreleased-section');
    expect(refusal(dir, next)).to.equal('tag-exists');
  });

  it('refuses a dirty work tree', () => {
    const dir = clone();
    fs.appendFileSync(path.join(dir, 'README.md'), '\nuncommitted\n');
    expect(refusal(dir, 'minor')).to.equal('dirty-tree');
  });

  it('refuses a tag that exists, a version older than the current one, and a malformed one', () => {
    const dir = clone();
    const next = bumpVersion(checkVersions(dir), 'minor');
    git(dir, 'tag', `v${next}`);
    expect(refusal(dir, 'minor')).to.equal('tag-exists');
    expect(refusal(dir, '0.0.0')).to.equal('version-not-newer');
    expect(refusal(dir, 'v9.0.0')).to.equal('bad-version');
  });

  it('refuses a tree without the LICENSE', () => {
    const dir = clone();
    git(dir, 'rm', '--quiet', 'LICENSE');
    git(dir, 'commit', '--quiet', '-m', 'no license');
    expect(refusal(dir, 'minor')).to.equal('no-license');
  });
});
