/**
 * Every place in the repository that names the release version, and how to read and rewrite
 * it. One version for everything: the service (package.json, its lock file), the Node client,
 * the Python client, the image tag in the Dockerfile's label argument, the compose files and
 * the Kubernetes manifests, the README's install commands and the OpenAPI document. package.json
 * is the source; `release/sync-version.ts` writes the others and test/unit/release-versions
 * checks they agree.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ReleaseError } from './release-error.js';

/**
 * A release version: X.Y.Z. No pre-release suffixes: Python spells them differently (PEP 440's
 * 0.3.0rc1 against semver's 0.3.0-rc.1), and artifact names such as `…-0.2.0-py3-none-any.whl`
 * would read as one.
 */
export const VERSION_SYNTAX = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;

/** The same, as a capture group inside a larger pattern. */
const VERSION_GROUP = '(\\d+\\.\\d+\\.\\d+)';

/** The Python client's import package, whose modules may carry `__version__`. */
const PYTHON_PACKAGE_DIR = 'clients/python/exitpool_client';

export interface VersionPlace {
  /** Relative to the repository root, with forward slashes. */
  readonly file: string;
  /** What the version is there, for messages. */
  readonly what: string;
  /** A place that may be absent (the Python client keeps its version in one of several places). */
  readonly optional: boolean;
  /** Every version this place names in `text` (none when it names none). */
  find(text: string): string[];
  /** `text` with every version of this place replaced by `version`. */
  replace(text: string, version: string): string;
}

export interface FoundVersion {
  readonly file: string;
  readonly what: string;
  readonly version: string;
}

export function assertVersionSyntax(version: string): void {
  if (!VERSION_SYNTAX.test(version)) {
    throw new ReleaseError('bad-version', `not a release version: ${JSON.stringify(version)} (expected X.Y.Z)`);
  }
}

function parts(version: string): [number, number, number] {
  const m = VERSION_SYNTAX.exec(version);
  if (!m) throw new ReleaseError('bad-version', `not a release version: ${JSON.stringify(version)} (expected X.Y.Z)`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** Negative, zero or positive as `a` is older than, equal to or newer than `b`. */
export function compareVersions(a: string, b: string): number {
  const [pa, pb] = [parts(a), parts(b)];
  return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
}

/** The next version by semver's rules for `part`. */
export function bumpVersion(version: string, part: 'major' | 'minor' | 'patch'): string {
  const [major, minor, patch] = parts(version);
  if (part === 'major') return `${major + 1}.0.0`;
  if (part === 'minor') return `${major}.${minor + 1}.0`;
  return `${major}.${minor}.${patch + 1}`;
}

/** A string field of a JSON file, by its keys from the top (written back with npm's layout). */
function jsonPlace(file: string, what: string, keys: readonly string[]): VersionPlace {
  const holder = (doc: unknown): Record<string, unknown> | undefined => {
    let node = doc;
    for (const key of keys.slice(0, -1)) {
      if (typeof node !== 'object' || node === null) return undefined;
      node = (node as Record<string, unknown>)[key];
    }
    return typeof node === 'object' && node !== null ? (node as Record<string, unknown>) : undefined;
  };
  const last = keys[keys.length - 1] as string;
  return {
    file,
    what,
    optional: false,
    find(text) {
      const value = holder(JSON.parse(text))?.[last];
      return typeof value === 'string' ? [value] : [];
    },
    replace(text, version) {
      const doc: unknown = JSON.parse(text);
      const node = holder(doc);
      if (node === undefined || typeof node[last] !== 'string') return text;
      node[last] = version;
      return `${JSON.stringify(doc, null, 2)}\n`;
    },
  };
}

/**
 * Every match of `pattern` in a text file; `pattern` is a regular expression source in which
 * `{V}` stands for the version (one capture group; the pattern has no other groups).
 */
function textPlace(file: string, what: string, pattern: string, optional = false): VersionPlace {
  const [before, after] = pattern.split('{V}') as [string, string];
  const regex = (): RegExp => new RegExp(`(${before})${VERSION_GROUP}(${after})`, 'gm');
  return {
    file,
    what,
    optional,
    find: (text) => [...text.matchAll(regex())].map((m) => m[2] as string),
    replace: (text, version) => text.replace(regex(), (_all, head: string, _old: string, tail: string) => `${head}${version}${tail}`),
  };
}

/** The image as the manifests and docs name it: `exitpool:X.Y.Z`, with or without a registry. */
const IMAGE_REFERENCE = '(?:[a-z0-9.-]+(?::\\d+)?/)?exitpool:{V}';

/**
 * What the README's install commands name with a version: the image, the archive and the
 * packages (`exitpool-X.Y.Z.oci.tar`, `exitpool@X.Y.Z`, `exitpool_client-X.Y.Z-py3-none-any.whl`).
 */
const INSTALL_COMMAND_NAMES = '(?:(?:[a-z0-9.-]+(?::\\d+)?/)?exitpool:|exitpool[-@]|exitpool[-_]client[-@]|@exitpool/client@){V}';

/** The places that name the version, in `root`. The Python client's module files are looked up. */
export function versionPlaces(root: string): VersionPlace[] {
  const places: VersionPlace[] = [
    jsonPlace('package.json', 'the service version', ['version']),
    jsonPlace('package-lock.json', "the lock file's version", ['version']),
    jsonPlace('package-lock.json', "the lock file's root package", ['packages', '', 'version']),
    jsonPlace('package-lock.json', "the lock file's Node client", ['packages', 'clients/node', 'version']),
    jsonPlace('clients/node/package.json', 'the Node client version', ['version']),
    textPlace('clients/python/pyproject.toml', 'the Python client version ([project] version)', '^version\\s*=\\s*"{V}"', true),
    textPlace('Dockerfile', "the image's version label", '^ARG VERSION={V}$'),
    textPlace('compose.yml', 'the image tag', `^\\s*image:\\s*${IMAGE_REFERENCE}$`),
    textPlace('deploy/compose/compose.yaml', 'the image tag', `^\\s*image:\\s*${IMAGE_REFERENCE}$`),
    textPlace('deploy/kubernetes/exitpool.yaml', 'the image tag', `^\\s*image:\\s*${IMAGE_REFERENCE}$`),
    textPlace('deploy/kubernetes/README.md', 'the image and its archive in the commands', INSTALL_COMMAND_NAMES),
    textPlace('README.md', 'the install commands', INSTALL_COMMAND_NAMES),
    textPlace('docs/openapi.yaml', 'info.version', '^  version: {V}$'),
  ];
  const packageDir = path.join(root, PYTHON_PACKAGE_DIR);
  if (fs.existsSync(packageDir)) {
    for (const name of fs.readdirSync(packageDir).filter((f) => f.endsWith('.py')).sort()) {
      places.push(textPlace(`${PYTHON_PACKAGE_DIR}/${name}`, 'the Python client version (__version__)', '^__version__\\s*=\\s*["\']{V}["\']', true));
    }
  }
  return places;
}

function readPlace(root: string, place: VersionPlace): string | undefined {
  const file = path.join(root, place.file);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined;
}

/**
 * Every version every place names. A place that is not optional and names none is refused, and
 * so is a Python client that states its version nowhere.
 */
export function readVersions(root: string): FoundVersion[] {
  const found: FoundVersion[] = [];
  const missing: string[] = [];
  for (const place of versionPlaces(root)) {
    const text = readPlace(root, place);
    const versions = text === undefined ? [] : place.find(text);
    if (versions.length === 0 && !place.optional) missing.push(`${place.file} (${place.what})`);
    for (const version of versions) found.push({ file: place.file, what: place.what, version });
  }
  if (!found.some((f) => f.file.startsWith('clients/python/'))) missing.push('clients/python (the Python client version: pyproject.toml [project] version or __version__)');
  if (missing.length > 0) throw new ReleaseError('place-missing', `no version found in: ${missing.join('; ')}`);
  return found;
}

/** package.json's version, after checking that every place names it. */
export function checkVersions(root: string): string {
  const found = readVersions(root);
  const source = found[0] as FoundVersion;
  const differing = found.filter((f) => f.version !== source.version);
  if (differing.length > 0) {
    const list = differing.map((f) => `${f.file} (${f.what}): ${f.version}`).join('; ');
    throw new ReleaseError('versions-differ', `package.json says ${source.version}, but ${list} (run: npm run release:version -- ${source.version})`);
  }
  return source.version;
}

/** Writes `version` into every place; returns the files it changed. */
export function writeVersion(root: string, version: string): string[] {
  assertVersionSyntax(version);
  // Refuse before writing anything when a place is missing, so a failed sync changes nothing.
  readVersions(root);
  const changed = new Set<string>();
  for (const place of versionPlaces(root)) {
    const text = readPlace(root, place);
    if (text === undefined) continue;
    const next = place.replace(text, version);
    if (next !== text) {
      fs.writeFileSync(path.join(root, place.file), next);
      changed.add(place.file);
    }
  }
  return [...changed];
}
