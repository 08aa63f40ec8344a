import http from 'node:http';

export interface RawHttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/**
 * One HTTP request with exactly the headers given, Host included (fetch will not let a caller
 * set Host, Origin or Sec-Fetch-*: these are what a browser sends and what the guards read).
 * A fresh connection each time, so an answer that closes the socket cannot break the next one.
 */
export function rawHttp(base: string, method: string, pathname: string, headers: Record<string, string>, body?: string): Promise<RawHttpResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path: pathname, headers, setHost: false, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
