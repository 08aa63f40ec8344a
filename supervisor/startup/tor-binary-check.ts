import { execFile } from 'node:child_process';
import { StartupError } from './startup-error.js';

/** `tor --version` answers in milliseconds; a binary that does not within this is unusable. */
export const TOR_BINARY_CHECK_TIMEOUT_MS = 15_000;

/**
 * Runs `TOR_BINARY --version` once before any instance is spawned. Without this a missing or
 * broken binary shows up only as instances that never start, restarted forever.
 */
export function checkTorBinary(torBinary: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(torBinary, ['--version'], { timeout: TOR_BINARY_CHECK_TIMEOUT_MS, env }, (error, stdout) => {
      if (error) {
        const code = (error as NodeJS.ErrnoException).code;
        const why =
          code === 'ENOENT'
            ? `${JSON.stringify(torBinary)} was not found (install Debian's tor package, or set TOR_BINARY to its path)`
            : code === 'EACCES'
              ? `${JSON.stringify(torBinary)} is not executable`
              : `${JSON.stringify(torBinary)} --version failed: ${error.message.split('\n')[0] ?? ''}`;
        reject(new StartupError('TOR_BINARY', why));
        return;
      }
      resolve(stdout.split('\n')[0]?.trim() ?? '');
    });
  });
}
