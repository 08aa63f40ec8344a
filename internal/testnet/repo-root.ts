import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository root: the first directory above this module holding a package.json. Assets
 * such as the shim's C source live in the source tree, and compiled code runs from an out
 * dir (dist/, dist-<name>/) at any depth, so relative paths from the module would break.
 */
export function findRepoRoot(fromUrl: string = import.meta.url): string {
  let dir = path.dirname(fileURLToPath(fromUrl));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(fromUrl)}`);
    dir = parent;
  }
}
