import net from 'node:net';

/** A SOCKS5 username and password (RFC 1929) as they crossed the wire. */
export interface SniffedCredentials {
  username: string;
  password: string;
}

export interface SniffingRelay {
  /** Every SOCKS5 credential a client sent through the relay, in order. */
  readonly sniffed: SniffedCredentials[];
  close(): Promise<void>;
}

/**
 * A TCP relay on loopback that passes every byte both ways, and reads the SOCKS5 credentials of
 * each connection as an eavesdropper on the hop would: what a stolen hop credential is.
 */
export async function startSniffingRelay(listen: { host: string; port: number }, target: { host: string; port: number }): Promise<SniffingRelay> {
  const sniffed: SniffedCredentials[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    let seen = Buffer.alloc(0);
    let done = false;
    client.on('data', (chunk: Buffer) => {
      if (!done) {
        seen = Buffer.concat([seen, chunk]);
        const credentials = readCredentials(seen);
        if (credentials !== null) {
          sniffed.push(credentials);
          done = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  return {
    sniffed,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The RFC 1929 request after the greeting, once both are whole; null before. */
function readCredentials(b: Buffer): SniffedCredentials | null {
  if (b.length < 2) return null;
  const afterGreeting = 2 + (b[1] as number);
  if (b.length < afterGreeting + 2) return null;
  const ulen = b[afterGreeting + 1] as number;
  const passAt = afterGreeting + 2 + ulen;
  if (b.length < passAt + 1) return null;
  const plen = b[passAt] as number;
  if (b.length < passAt + 1 + plen) return null;
  return { username: b.subarray(afterGreeting + 2, passAt).toString('utf8'), password: b.subarray(passAt + 1, passAt + 1 + plen).toString('utf8') };
}
