/**
 * `npm run release:version -- X.Y.Z` writes X.Y.Z into every place that names the release
 * version (release/version-places.ts); `-- --check` only checks that they agree and prints the
 * version. Run from the repository root.
 */
import { errorMessage } from '../shared/errors/error-message.js';
import { ReleaseError } from './release-error.js';
import { checkVersions, writeVersion } from './version-places.js';

function main(args: readonly string[]): number {
  const root = process.cwd();
  const [arg] = args;
  if (arg === undefined || arg === '--check') {
    process.stdout.write(`${checkVersions(root)}\n`);
    return 0;
  }
  const changed = writeVersion(root, arg);
  checkVersions(root);
  process.stdout.write(changed.length > 0 ? `version ${arg} written to:\n${changed.map((f) => `  ${f}\n`).join('')}` : `every place already names ${arg}\n`);
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`release:version: ${errorMessage(e)}\n`);
  process.exitCode = e instanceof ReleaseError ? 1 : 2;
}
