/**
 * A lean SOCKS5 server standing in for a tor instance's SocksPort in the benchmarks
 * (test/support/fake-socks-backend.ts records every request and concatenates every chunk, which
 * is right for tests but is work a benchmark should not measure). It parses the handshake
 * (username/password when the client offers it, any pair accepted, as tor's SocksPort does; else
 * no authentication), dials IPv4 targets and `localhost`, then pipes. A CONNECT to DISCARD_HOST
 * is answered by the server itself (success, then incoming bytes are dropped), so an idle
 * benchmark holds one socket here per connection instead of two.
 */
import net from 'node:net';
import { METHOD_NO_AUTHENTICATION, METHOD_NONE_ACCEPTABLE, METHOD_USERNAME_PASSWORD, parseUserPasswordRequest, USER_PASSWORD_ACCEPTED, USER_PASSWORD_REFUSED } from '../workers/proxy/socks5-protocol.js';

export const DISCARD_HOST = 'discard.bench';

const REPLY_SUCCESS = Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
const REPLY_HOST_UNREACHABLE = Buffer.from([5, 4, 0, 1, 0, 0, 0, 0, 0, 0]);
const REPLY_CONNECTION_REFUSED = Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0]);
const REPLY_ADDRESS_TYPE_NOT_SUPPORTED = Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]);

export interface LeanSocksBackend {
  readonly port: number;
  /** Client connections currently open. */
  connections(): number;
  close(): Promise<void>;
}

interface ParsedRequest {
  host: string;
  port: number;
  /** Bytes after the request (a client that pipelines its first payload). */
  rest: Buffer;
}

/** Parses a CONNECT request; null when more bytes are needed, 'unsupported' for other commands or types. */
function parseRequest(buf: Buffer): ParsedRequest | null | 'unsupported' {
  if (buf.length < 5) return null;
  if (buf[0] !== 5 || buf[1] !== 1) return 'unsupported';
  const type = buf[3];
  let end: number;
  let host: string;
  if (type === 1) {
    end = 10;
    if (buf.length < end) return null;
    host = `${buf[4]}.${buf[5]}.${buf[6]}.${buf[7]}`;
  } else if (type === 3) {
    end = 7 + (buf[4] as number);
    if (buf.length < end) return null;
    host = buf.toString('latin1', 5, end - 2);
  } else {
    return 'unsupported';
  }
  return { host, port: buf.readUInt16BE(end - 2), rest: buf.subarray(end) };
}

export function startLeanSocksBackend(listenHost = '127.0.0.1'): Promise<LeanSocksBackend> {
  const sockets = new Set<net.Socket>();
  let clients = 0;
  const track = (socket: net.Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };

  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    track(client);
    clients += 1;
    client.on('close', () => (clients -= 1));
    let pending: Buffer | null = null;
    let stage: 'greeting' | 'credentials' | 'request' = 'greeting';
    const onData = (chunk: Buffer): void => {
      let buf = pending === null ? chunk : Buffer.concat([pending, chunk]);
      pending = null;
      if (stage === 'greeting') {
        if (buf.length < 2 || buf.length < 2 + (buf[1] as number)) {
          pending = buf;
          return;
        }
        const methods = buf.subarray(2, 2 + (buf[1] as number));
        // As tor does: username/password when offered (any pair is accepted), else none.
        const withCredentials = methods.includes(2);
        if (buf[0] !== 5 || (!withCredentials && !methods.includes(0))) {
          client.end(METHOD_NONE_ACCEPTABLE);
          return;
        }
        client.write(withCredentials ? METHOD_USERNAME_PASSWORD : METHOD_NO_AUTHENTICATION);
        stage = withCredentials ? 'credentials' : 'request';
        buf = buf.subarray(2 + (buf[1] as number));
      }
      if (stage === 'credentials') {
        const credentials = parseUserPasswordRequest(buf);
        if (credentials.status === 'need-more') {
          if (buf.length > 0) pending = buf;
          return;
        }
        if (credentials.status === 'error') {
          client.end(USER_PASSWORD_REFUSED);
          return;
        }
        client.write(USER_PASSWORD_ACCEPTED);
        stage = 'request';
        buf = buf.subarray(credentials.consumed);
      }
      const request = parseRequest(buf);
      if (request === null) {
        if (buf.length > 0) pending = buf;
        return;
      }
      client.removeListener('data', onData);
      if (request === 'unsupported') {
        client.end(REPLY_ADDRESS_TYPE_NOT_SUPPORTED);
        return;
      }
      if (request.host === DISCARD_HOST) {
        client.write(REPLY_SUCCESS);
        client.on('data', () => undefined);
        client.on('end', () => client.end());
        return;
      }
      const address = request.host === 'localhost' ? '127.0.0.1' : net.isIPv4(request.host) ? request.host : null;
      if (address === null) {
        client.end(REPLY_HOST_UNREACHABLE);
        return;
      }
      client.pause();
      const upstream = net.connect({ host: address, port: request.port, allowHalfOpen: true, noDelay: true });
      track(upstream);
      upstream.once('error', () => {
        if (!client.destroyed) client.end(REPLY_CONNECTION_REFUSED);
      });
      upstream.once('connect', () => {
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        client.write(REPLY_SUCCESS);
        if (request.rest.length > 0) upstream.write(request.rest);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    client.on('data', onData);
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => {
      server.removeListener('error', reject);
      const { port } = server.address() as net.AddressInfo;
      resolve({
        port,
        connections: () => clients,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}
