import fs from 'node:fs';

/**
 * The TCP sockets in LISTEN state that process `pid` holds, as `address:port` (hex as the kernel
 * writes them in /proc/net/tcp{,6}). Read from /proc, so it needs no tool and sees exactly that
 * process's descriptors.
 */
export function tcpListenersOf(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed while listing
    }
  }
  const listening: string[] = [];
  for (const table of ['tcp', 'tcp6']) {
    const lines = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1);
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      // local_address st ... inode: columns 1, 3 and 9.
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9]!)) listening.push(f[1]!);
    }
  }
  return listening;
}
