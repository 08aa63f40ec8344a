/**
 * Building blocks of the load tests: HTTP CONNECT tunnels (the SOCKS5 ones are in
 * clients/socks5-client.ts), a bounded-concurrency runner for opening thousands of tunnels, and a
 * fixed-rate request generator that counts exactly what it started and how each ended.
 */
import net from 'node:net';

export type ConnectOutcome = { ok: true; socket: net.Socket; elapsedMs: number } | { ok: false; error: string; elapsedMs: number };

/** Opens a CONNECT tunnel through the HTTP proxy listener; resolves once the 200 head is read. */
export function openConnectTunnel(o: { port: number; username: string; password: string; host: string; targetPort: number; timeoutMs: number }): Promise<ConnectOutcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const socket = net.connect({ host: '127.0.0.1', port: o.port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (outcome: ConnectOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      if (!outcome.ok) socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ ok: false, error: `no CONNECT answer within ${o.timeoutMs} ms`, elapsedMs: elapsed() }), o.timeoutMs);
    const onClose = (): void => finish({ ok: false, error: 'closed before the CONNECT answer', elapsedMs: elapsed() });
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(buf.subarray(0, end).toString('latin1'));
      if (!status || status[1] !== '200') {
        finish({ ok: false, error: `CONNECT answered ${buf.subarray(0, Math.min(end, 120)).toString('latin1')}`, elapsedMs: elapsed() });
        return;
      }
      const rest = buf.subarray(end + 4);
      finish({ ok: true, socket, elapsedMs: elapsed() });
      if (rest.length > 0) socket.unshift(rest);
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.on('error', () => undefined); // 'close' follows; later resets must not crash the test process
    socket.once('connect', () => {
      const credential = Buffer.from(`${o.username}:${o.password}`, 'utf8').toString('base64');
      const authority = `${o.host}:${o.targetPort}`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Basic ${credential}\r\n\r\n`);
    });
  });
}

/** Runs `fn` over `items` with at most `concurrency` calls in flight; results keep the input order. */
export async function mapWithConcurrency<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      results[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}

export interface RateOutcome {
  ok: boolean;
  /** What the request was, for grouping in the report (e.g. 'socks-echo', 'http-get'). */
  kind: string;
  error: string;
}

/**
 * Starts `fn(n)` `perSecond` times a second (n counts from 0) until stop(); stop() waits for
 * every started call, so the counts are exact: started === outcomes.length.
 */
export class FixedRate {
  started = 0;
  readonly outcomes: RateOutcome[] = [];
  private readonly pending = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;

  constructor(perSecond: number, fn: (n: number) => Promise<RateOutcome>) {
    this.timer = setInterval(() => {
      const n = this.started++;
      const p = fn(n)
        .catch((e: unknown): RateOutcome => ({ ok: false, kind: 'threw', error: (e as Error).message }))
        .then((o) => {
          this.outcomes.push(o);
        });
      this.pending.add(p);
      void p.finally(() => this.pending.delete(p));
    }, 1000 / perSecond);
  }

  async stop(): Promise<RateOutcome[]> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
    return this.outcomes;
  }
}
