import { request } from 'node:http';

export interface DirectoryResponse {
  readonly status: number;
  readonly body: string;
}

/** Max document size accepted: a consensus of a dozen relays is a few kilobytes. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** GET of a directory document from an authority's DirPort (plain HTTP/1.0, uncompressed). */
export function fetchDirectoryDocument(host: string, port: number, path: string, timeoutMs: number): Promise<DirectoryResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method: 'GET', timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          req.destroy(new Error(`directory document larger than ${MAX_BODY_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`directory request timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
