/**
 * A lean SOCKS5 server standing in for a tor instance's SocksPort in the benchmarks
 * (test/support/fakes/socks-backend.ts records every request and concatenates every chunk, which
 * is right for tests but is work a benchmark should not measure). It parses the handshake with
 * the proxy's own parsers (workers/proxy/socks5-protocol.ts: username/password when the client
 * offers it, any pair accepted, as tor's SocksPort does; else no authentication), dials IPv4
 * targets and `localhost`, then pipes. A CONNECT to DISCARD_HOST
 * is answered by the server itself (success, then incoming bytes are dropped), so an idle
 * benchmark holds one socket here per connection instead of two.
 */
import net from 'node:net';
import {
  AuthMethod,
  encodeReply,
  METHOD_NO_AUTHENTICATION,
  METHOD_NONE_ACCEPTABLE,
  METHOD_USERNAME_PASSWORD,
  parseGreeting,
  parseRequest,
  parseUserPasswordRequest,
  REPLY_SUCCEEDED,
  ReplyCode,
  USER_PASSWORD_ACCEPTED,
  USER_PASSWORD_REFUSED,
} from '../workers/proxy/socks5-protocol.js';

export const DISCARD_HOST = 'discard.bench';

const REPLY_HOST_UNREACHABLE = encodeReply(ReplyCode.HostUnreachable);
const REPLY_CONNECTION_REFUSED = encodeReply(ReplyCode.ConnectionRefused);
const REPLY_COMMAND_NOT_SUPPORTED = encodeReply(ReplyCode.CommandNotSupported);

export interface LeanSocksBackend {
  readonly port: number;
  /** Client connections currently open. */
  connections(): number;
  close(): Promise<void>;
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
        const greeting = parseGreeting(buf);
        if (greeting.status === 'need-more') {
          pending = buf;
          return;
        }
        // As tor does: username/password when offered (any pair is accepted), else none.
        const methods = greeting.status === 'ok' ? greeting.value.methods : [];
        const withCredentials = methods.includes(AuthMethod.UsernamePassword);
        if (greeting.status === 'error' || (!withCredentials && !methods.includes(AuthMethod.NoAuthentication))) {
          client.end(METHOD_NONE_ACCEPTABLE);
          return;
        }
        client.write(withCredentials ? METHOD_USERNAME_PASSWORD : METHOD_NO_AUTHENTICATION);
        stage = withCredentials ? 'credentials' : 'request';
        buf = buf.subarray(greeting.consumed);
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
      const parsed = parseRequest(buf);
      if (parsed.status === 'need-more') {
        if (buf.length > 0) pending = buf;
        return;
      }
      client.removeListener('data', onData);
      if (parsed.status === 'error') {
        client.end(encodeReply(parsed.error.replyCode ?? ReplyCode.GeneralFailure));
        return;
      }
      if (parsed.value.command !== 'connect') {
        client.end(REPLY_COMMAND_NOT_SUPPORTED);
        return;
      }
      const { host, port } = parsed.value.target;
      const rest = buf.subarray(parsed.consumed);
      if (host === DISCARD_HOST) {
        client.write(REPLY_SUCCEEDED);
        client.on('data', () => undefined);
        client.on('end', () => client.end());
        return;
      }
      const address = host === 'localhost' ? '127.0.0.1' : net.isIPv4(host) ? host : null;
      if (address === null) {
        client.end(REPLY_HOST_UNREACHABLE);
        return;
      }
      client.pause();
      const upstream = net.connect({ host: address, port, allowHalfOpen: true, noDelay: true });
      track(upstream);
      upstream.once('error', () => {
        if (!client.destroyed) client.end(REPLY_CONNECTION_REFUSED);
      });
      upstream.once('connect', () => {
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        client.write(REPLY_SUCCEEDED);
        if (rest.length > 0) upstream.write(rest);
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
