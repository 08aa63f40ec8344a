import fs from 'node:fs';

/** True while a process with this PID exists (and is not a zombie). */
export function isAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

/** Polls until none of the PIDs is alive; returns those still alive at the deadline. */
export async function waitAllGone(pids: readonly number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = pids.filter(isAlive);
    if (alive.length === 0 || Date.now() > deadline) return alive;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The user name owning a process (from /proc/PID/status Uid and /etc/passwd). */
export function processUser(pid: number): string {
  const uid = /Uid:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.split(':')[2] === uid);
  return line?.split(':')[0] ?? `uid ${uid}`;
}
