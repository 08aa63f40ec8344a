import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/**
 * Whether the shim library is mapped into a process. ld.so only warns and carries on when an
 * LD_PRELOAD library cannot be loaded, so the environment variable alone proves nothing.
 */
export async function isShimMapped(pid: number, shimPath: string): Promise<boolean> {
  const wanted = realpathSync(shimPath);
  let maps: string;
  try {
    maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return false;
  }
  return maps.split('\n').some((line) => line.endsWith(` ${wanted}`));
}
