import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository (or installed package) root: the nearest directory above with a package.json. */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('exitpool: package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

let cached: string | undefined;

/** The service version, X.Y.Z, from package.json: the single source. */
export function serviceVersion(): string {
  if (cached === undefined) {
    const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
    cached = pkg.version;
  }
  return cached;
}
