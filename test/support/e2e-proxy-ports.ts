import net from 'node:net';

export class NoFreePortRangeError extends Error {
  constructor(readonly count: number) {
    super(`no range of ${count} free loopback ports found`);
    this.name = 'NoFreePortRangeError';
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A base for SESSION_PORT_BASE whose `count` ports are free now. Drawn from 12000–19999: below
 * the test network's port blocks (20000 and up, 100 a block), the instance ports service-fixture
 * draws (30000 and up) and the kernel's ephemeral range (32768 and up), so none of them can take
 * these ports between this check and the service binding them.
 */
export async function freeSessionPortBase(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 12_000 + Math.floor(Math.random() * 790) * 10;
    const checks = await Promise.all(Array.from({ length: count }, (_, i) => portFree(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new NoFreePortRangeError(count);
}
