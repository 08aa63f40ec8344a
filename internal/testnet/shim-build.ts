import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { ShimBuildError } from './errors.js';
import { findExecutable } from './required-tools.js';
import { runProgram } from './run-program.js';

export const SHIM_SOURCE_RELATIVE = path.join('internal', 'testnet', 'shim', 'exitpool-loopback-shim.c');
const GCC_FLAGS = ['-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Werror'];
const GCC_TIMEOUT_MS = 60_000;

/**
 * The compiled shim, built with gcc into the cache dir when missing or outdated. The file name
 * carries a digest of the source and flags, so an edited source gets a new library and a
 * library in use by a running network is never overwritten (concurrent runs share the cache).
 */
export async function ensureShimBuilt(repoRoot: string, cacheDir: string, log: Logger): Promise<string> {
  const sourcePath = path.join(repoRoot, SHIM_SOURCE_RELATIVE);
  const source = await readFile(sourcePath);
  const digest = createHash('sha256').update(source).update(GCC_FLAGS.join(' ')).digest('hex').slice(0, 16);
  const target = path.join(cacheDir, `exitpool-loopback-shim-${digest}.so`);
  if (existsSync(target)) return target;

  const gcc = findExecutable('gcc');
  await mkdir(cacheDir, { recursive: true });
  const temporary = path.join(cacheDir, `.build-${process.pid}-${randomBytes(4).toString('hex')}.so`);
  const started = Date.now();
  const result = await runProgram(gcc, [...GCC_FLAGS, '-o', temporary, sourcePath, '-ldl'], { timeoutMs: GCC_TIMEOUT_MS });
  if (result.code !== 0) {
    await rm(temporary, { force: true });
    throw new ShimBuildError(result.stderr + result.stdout);
  }
  // rename is atomic: a concurrent builder of the same digest simply replaces an identical file.
  await rename(temporary, target);
  log.info('loopback shim built', { path: target, durationMs: Date.now() - started });
  return target;
}
