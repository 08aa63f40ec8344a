import { execFile } from 'node:child_process';

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real curl client; never throws on a non-zero exit (the code is the result). */
export function curl(args: readonly string[], timeoutMs = 30_000): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', String(Math.ceil(timeoutMs / 1000)), ...args], { timeout: timeoutMs + 5000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : -1) : 0;
      resolve({ code, stdout: stdout.toString(), stderr: stderr.toString() });
    });
  });
}

/** GET through the SOCKS5 listener (names resolved by the exit: --socks5-hostname). */
export function curlSocks(port: number, user: string | null, password: string | null, url: string, extra: string[] = []): Promise<CurlResult> {
  const cred = user === null ? '' : `${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@`;
  return curl(['--socks5-hostname', `${cred}127.0.0.1:${port}`, ...extra, url]);
}

/** GET through the HTTP proxy listener. */
export function curlHttp(port: number, user: string | null, password: string | null, url: string, extra: string[] = []): Promise<CurlResult> {
  const cred = user === null ? '' : `${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@`;
  return curl(['-x', `http://${cred}127.0.0.1:${port}`, ...extra, url]);
}
