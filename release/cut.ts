/**
 * `npm run release:cut -- [X.Y.Z | major | minor | patch] [--date YYYY-MM-DD]` (default: minor)
 * makes a release commit and its tag in the repository it is run in: every version place set to
 * the new version (release/version-places.ts), the CHANGELOG's "Unreleased" entries cut to a
 * dated section, a commit "Release X.Y.Z" and an annotated tag vX.Y.Z. It refuses a dirty work
 * tree, a missing LICENSE, an existing tag, an empty "Unreleased" section and a version older
 * than the current one, before it changes anything. Nothing is pushed: see docs/releasing.md.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../shared/errors/error-message.js';
import { cutChangelog, releaseDate } from './changelog-cut.js';
import { ReleaseError } from './release-error.js';
import { assertVersionSyntax, bumpVersion, checkVersions, compareVersions, writeVersion } from './version-places.js';

const CHANGELOG = 'CHANGELOG.md';
const LICENSE = 'LICENSE';

function git(root: string, args: readonly string[]): string {
  try {
    return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const stderr = (e as { stderr?: unknown }).stderr;
    throw new ReleaseError('git-failed', `git ${args.join(' ')} failed: ${typeof stderr === 'string' && stderr.trim() !== '' ? stderr.trim() : errorMessage(e)}`);
  }
}

function tagExists(root: string, tag: string): boolean {
  try {
    execFileSync('git', ['rev-parse', '--verify', '--quiet', `refs/tags/${tag}`], { cwd: root, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface CutOptions {
  /** X.Y.Z, or the part of the current version to bump. */
  readonly target: string;
  /** The release day, YYYY-MM-DD (default: today, UTC). */
  readonly date: string;
}

export interface CutResult {
  readonly version: string;
  readonly tag: string;
  readonly commit: string;
  readonly changedFiles: readonly string[];
}

/** Cuts the release in the git work tree `root` (see the file comment). */
export function cutRelease(root: string, options: CutOptions): CutResult {
  if (git(root, ['status', '--porcelain']).trim() !== '') {
    throw new ReleaseError('dirty-tree', 'the work tree has uncommitted changes: commit or stash them before cutting a release');
  }
  const licenseFile = path.join(root, LICENSE);
  if (!fs.existsSync(licenseFile) || !/^MIT License\b/.test(fs.readFileSync(licenseFile, 'utf8'))) {
    throw new ReleaseError('no-license', `${LICENSE} is missing or is not the MIT license the manifests declare`);
  }
  const current = checkVersions(root);
  const { target } = options;
  const version = target === 'major' || target === 'minor' || target === 'patch' ? bumpVersion(current, target) : target;
  assertVersionSyntax(version);
  if (compareVersions(version, current) < 0) throw new ReleaseError('version-not-newer', `${version} is older than the current version ${current}`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(options.date)) throw new ReleaseError('bad-version', `not a date (YYYY-MM-DD): ${options.date}`);
  const tag = `v${version}`;
  if (tagExists(root, tag)) throw new ReleaseError('tag-exists', `the tag ${tag} exists already`);
  const changelogFile = path.join(root, CHANGELOG);
  // Computed before anything is written: a refusal leaves the tree as it was.
  const changelog = cutChangelog(fs.readFileSync(changelogFile, 'utf8'), version, options.date);
  const changed = writeVersion(root, version);
  fs.writeFileSync(changelogFile, changelog);
  const changedFiles = [...changed, CHANGELOG];
  git(root, ['add', '--', ...changedFiles]);
  git(root, ['commit', '--quiet', '-m', `Release ${version}`]);
  git(root, ['tag', '--annotate', tag, '-m', `exitpool ${version}`]);
  return { version, tag, commit: git(root, ['rev-parse', 'HEAD']).trim(), changedFiles };
}

function parseArgs(args: readonly string[]): CutOptions {
  let target = 'minor';
  let date = releaseDate(new Date());
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--date') {
      date = args[++i] ?? '';
    } else if (arg.startsWith('--date=')) {
      date = arg.slice('--date='.length);
    } else {
      target = arg;
    }
  }
  return { target, date };
}

function main(): void {
  const result = cutRelease(process.cwd(), parseArgs(process.argv.slice(2)));
  process.stdout.write(
    [
      `release ${result.version}: commit ${result.commit.slice(0, 12)}, tag ${result.tag}`,
      `changed: ${result.changedFiles.join(', ')}`,
      'next: build and check the artifacts at the tag (npm run release:build), then publish them',
      '(docs/releasing.md); push the commit and the tag where your remote is.',
      '',
    ].join('\n'),
  );
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (e) {
    process.stderr.write(`release:cut: ${errorMessage(e)}\n`);
    process.exitCode = e instanceof ReleaseError ? 1 : 2;
  }
}
