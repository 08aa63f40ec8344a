import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { ToolMissingError } from './errors.js';

// Debian installs tor in /usr/sbin, which is not on every user's PATH.
const EXTRA_DIRS = ['/usr/sbin', '/usr/bin', '/usr/local/sbin', '/usr/local/bin'];

/** Absolute path of an executable, or ToolMissingError (never a skip: tests must fail loudly). */
export function findExecutable(name: string): string {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new ToolMissingError(name);
}
