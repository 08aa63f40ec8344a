import { execFile } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../../../shared/version.js';

/**
 * Debian's Python, whose packages (python3-requests, -httpx, -scrapy, -pytest) scripts/setup.sh
 * installs: the Python client is tested with the interpreter those packages belong to.
 */
export const DEBIAN_PYTHON = '/usr/bin/python3';

export interface PythonRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs Debian's Python with clients/python importable (in the repository root, or `cwd`); never throws on a non-zero exit. */
export function runPython(args: readonly string[], env: Record<string, string> = {}, input?: string, timeoutMs = 90_000, cwd?: string): Promise<PythonRun> {
  const root = packageRoot();
  return new Promise((resolve) => {
    const child = execFile(
      DEBIAN_PYTHON,
      args,
      {
        cwd: cwd ?? root,
        timeout: timeoutMs,
        encoding: 'utf8',
        maxBuffer: 16 * 2 ** 20,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PYTHONPATH: path.join(root, 'clients', 'python'), PYTHONDONTWRITEBYTECODE: '1', ...env },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}
