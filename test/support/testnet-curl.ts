import { execFile } from 'node:child_process';

export interface CurlResult {
  /** curl's exit code: 0 ok, 97 SOCKS/proxy handshake failure, 52 empty reply, 56 reset… */
  readonly exitCode: number;
  /** HTTP status, or undefined when no response arrived. */
  readonly httpStatus: number | undefined;
  readonly headers: string;
  readonly body: string;
  readonly stderr: string;
  readonly durationMs: number;
}

export interface CurlThroughSocksOptions {
  /** SOCKS username: tor isolates circuits per username (IsolateSOCKSAuth). */
  readonly username?: string;
  readonly maxTimeSeconds?: number;
}

const STATUS_MARKER = '\n__exitpool_http_status__=';

/**
 * A real curl through a tor SocksPort, hostname resolved by the exit: a TCP port, or the path of
 * a Unix-socket SocksPort (curl's socks5h://localhost/<path> form).
 */
export function curlThroughSocks(socks: number | string, url: string, options: CurlThroughSocksOptions = {}): Promise<CurlResult> {
  const proxy = typeof socks === 'number' ? ['--socks5-hostname', `127.0.0.1:${socks}`] : ['--proxy', `socks5h://localhost${socks}`];
  const args = ['-sS', '-D', '-', '--max-time', String(options.maxTimeSeconds ?? 30), ...proxy];
  if (options.username !== undefined) args.push('--proxy-user', `${options.username}:x`);
  args.push('-w', `${STATUS_MARKER}%{http_code}`, url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    // No inherited proxy variables: only the SOCKS proxy named here.
    execFile('curl', args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        reject(err);
        return;
      }
      const exitCode = err && typeof err.code === 'number' ? err.code : 0;
      const markerAt = stdout.lastIndexOf(STATUS_MARKER);
      const status = markerAt >= 0 ? Number(stdout.slice(markerAt + STATUS_MARKER.length)) : 0;
      const response = markerAt >= 0 ? stdout.slice(0, markerAt) : stdout;
      const split = response.indexOf('\r\n\r\n');
      resolve({
        exitCode,
        httpStatus: status > 0 ? status : undefined,
        headers: split >= 0 ? response.slice(0, split) : '',
        body: split >= 0 ? response.slice(split + 4) : response,
        stderr,
        durationMs: Date.now() - started,
      });
    });
  });
}
