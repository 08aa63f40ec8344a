/**
 * The far end of the throughput benchmarks. Protocol: the client sends the number of bytes it
 * wants as a 64-bit big-endian integer; the source sends exactly that many bytes (from one
 * preallocated buffer, so producing them costs only the writes) and ends. The client counts
 * what arrives, so a short or broken transfer cannot pass as a fast one.
 */
import net from 'node:net';

const REQUEST_BYTES = 8;
const CHUNK = Buffer.alloc(256 * 1024, 0x5a);

export interface DownloadSource {
  readonly port: number;
  close(): Promise<void>;
}

function sendBytes(socket: net.Socket, total: number): void {
  let left = total;
  const pump = (): void => {
    while (left > 0) {
      const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= chunk.length;
      if (!socket.write(chunk)) {
        socket.once('drain', pump);
        return;
      }
    }
    socket.end();
  };
  pump();
}

export function startDownloadSource(listenHost = '127.0.0.1'): Promise<DownloadSource> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      if (head.length < REQUEST_BYTES) return;
      socket.removeListener('data', onData);
      // Anything after the request is ignored; keep reading so the client's FIN is seen.
      socket.on('data', () => undefined);
      sendBytes(socket, Number(head.readBigUInt64BE(0)));
    };
    socket.on('data', onData);
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

export class ShortDownloadError extends Error {
  constructor(
    readonly expected: number,
    readonly received: number,
  ) {
    super(`download ended after ${received} of ${expected} bytes`);
    this.name = 'ShortDownloadError';
  }
}

/** Asks the source (through whatever tunnel `socket` is) for `bytes` and resolves when all arrived and the source ended. */
export function download(socket: net.Socket, bytes: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let received = 0;
    const request = Buffer.alloc(REQUEST_BYTES);
    request.writeBigUInt64BE(BigInt(bytes));
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.once('error', reject);
    socket.once('end', () => {
      socket.end();
      if (received === bytes) resolve();
      else reject(new ShortDownloadError(bytes, received));
    });
    socket.once('close', () => {
      if (received !== bytes) reject(new ShortDownloadError(bytes, received));
    });
    socket.write(request);
    socket.resume();
  });
}

/** The size of the request a download() writes upstream (for exact byte accounting). */
export const DOWNLOAD_REQUEST_BYTES = REQUEST_BYTES;
