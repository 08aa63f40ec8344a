/**
 * The limit for a Node relay: a one-hop `net` server that pipes every accepted connection to a
 * fixed target and does nothing else (no handshake, no routing, no accounting). The client's
 * SOCKS5 handshake passes through it to the backend untouched.
 */
import net from 'node:net';

export interface BareRelay {
  readonly port: number;
  close(): Promise<void>;
}

export function startBareRelay(targetPort: number, targetHost = '127.0.0.1', listenHost = '127.0.0.1'): Promise<BareRelay> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    const upstream = net.connect({ host: targetHost, port: targetPort, allowHalfOpen: true, noDelay: true });
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
