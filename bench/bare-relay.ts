/**
 * The limit for a Node relay: a one-hop `net` server that pipes every accepted connection to a
 * target and does nothing else (no handshake, no routing, no accounting). The client's SOCKS5
 * handshake passes through it to the backend untouched. Given several targets, it takes them in
 * turn (round robin), as HAProxy's `balance roundrobin` does.
 */
import net from 'node:net';

/** A TCP port on `host`, or a Unix socket (a tor instance's SocksPort). */
export type RelayTarget = { port: number; host?: string } | { path: string };

/** bench-child's arguments: a port, or an absolute Unix socket path. */
export function relayTargetOf(arg: string): RelayTarget {
  return arg.startsWith('/') ? { path: arg } : { port: Number(arg) };
}

export interface BareRelay {
  readonly port: number;
  close(): Promise<void>;
}

export function startBareRelay(target: number | RelayTarget | readonly RelayTarget[], targetHost = '127.0.0.1', listenHost = '127.0.0.1'): Promise<BareRelay> {
  const targets: readonly RelayTarget[] = typeof target === 'number' ? [{ port: target, host: targetHost }] : Array.isArray(target) ? target : [target as RelayTarget];
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    const t = targets[next++ % targets.length] as RelayTarget;
    const upstream = 'path' in t ? net.connect({ path: t.path, allowHalfOpen: true }) : net.connect({ host: t.host ?? '127.0.0.1', port: t.port, allowHalfOpen: true, noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => {
      server.removeListener('error', reject);
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}
