/**
 * A minimal SOCKS5 server standing in for a tor instance's SocksPort in component tests. It is
 * written independently of workers/proxy (no shared parser), so the proxy is checked against a
 * second implementation. It connects to real local destinations, resolves names only through
 * its own `hosts` table (so a test can prove a name arrived unresolved), and can be told to
 * refuse with a given reply code or to never answer.
 */
import net from 'node:net';

export interface RecordedSocksRequest {
  methods: number[];
  command: number;
  addressType: 'ipv4' | 'ipv6' | 'domain';
  host: string;
  port: number;
}

export interface FakeSocksBackend {
  readonly host: string;
  /** Set once listening. */
  port: number;
  readonly requests: RecordedSocksRequest[];
  /** Answer every CONNECT with this reply code (null: really connect). */
  refuseWith: number | null;
  /** Never answer CONNECT requests (to exercise deadlines). */
  silent: boolean;
  /** Name -> address table used for domain targets; anything else gets reply 4 (host unreachable). */
  readonly hosts: Map<string, string>;
  readonly connectionCount: () => number;
  close(): Promise<void>;
}

function formatV6(bytes: Buffer): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(bytes.readUInt16BE(i).toString(16));
  return words.join(':');
}

function reply(code: number): Buffer {
  return Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

export async function startFakeSocksBackend(): Promise<FakeSocksBackend> {
  const sockets = new Set<net.Socket>();
  const backend: FakeSocksBackend = {
    host: '127.0.0.1',
    port: 0,
    requests: [],
    refuseWith: null,
    silent: false,
    hosts: new Map([['localhost', '127.0.0.1']]),
    connectionCount: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const track = (socket: net.Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };

  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    track(client);
    let buf = Buffer.alloc(0);
    let stage: 'greeting' | 'request' | 'done' = 'greeting';
    let methods: number[] = [];
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      if (stage === 'greeting') {
        if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
        if (buf[0] !== 5) {
          client.destroy();
          return;
        }
        methods = [...buf.subarray(2, 2 + buf[1]!)];
        buf = buf.subarray(2 + buf[1]!);
        if (!methods.includes(0)) {
          client.end(Buffer.from([5, 0xff]));
          return;
        }
        client.write(Buffer.from([5, 0]));
        stage = 'request';
      }
      if (stage !== 'request' || buf.length < 5) return;
      const type = buf[3]!;
      let host: string;
      let addressType: RecordedSocksRequest['addressType'];
      let end: number;
      if (type === 1) {
        end = 10;
        if (buf.length < end) return;
        host = [...buf.subarray(4, 8)].join('.');
        addressType = 'ipv4';
      } else if (type === 4) {
        end = 22;
        if (buf.length < end) return;
        host = formatV6(buf.subarray(4, 20));
        addressType = 'ipv6';
      } else if (type === 3) {
        end = 5 + buf[4]! + 2;
        if (buf.length < end) return;
        host = buf.toString('latin1', 5, 5 + buf[4]!);
        addressType = 'domain';
      } else {
        client.end(reply(8));
        return;
      }
      const port = buf.readUInt16BE(end - 2);
      const rest = buf.subarray(end);
      stage = 'done';
      client.removeListener('data', onData);
      client.pause();
      backend.requests.push({ methods, command: buf[1]!, addressType, host, port });
      if (backend.silent) return;
      if (backend.refuseWith !== null) {
        client.end(reply(backend.refuseWith));
        return;
      }
      const address = addressType === 'domain' ? backend.hosts.get(host.toLowerCase()) : host;
      if (address === undefined) {
        client.end(reply(4));
        return;
      }
      const upstream = net.connect({ host: address, port, allowHalfOpen: true });
      track(upstream);
      upstream.once('error', () => {
        if (!client.destroyed) client.end(reply(5));
      });
      upstream.once('connect', () => {
        upstream.removeAllListeners('error');
        // A broken destination connection reaches the client as a reset, as a broken circuit does.
        upstream.on('error', () => client.resetAndDestroy());
        client.on('error', () => upstream.destroy());
        client.write(reply(0));
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    client.on('data', onData);
    // As tor does: a client that hangs up before its request is done with.
    client.on('end', () => {
      if (stage !== 'done') client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  backend.port = (server.address() as net.AddressInfo).port;
  return backend;
}
