import { execFile } from 'node:child_process';

/** The tests' one curl wrapper: the real client, as a user would run it. */

export interface CurlResult {
  /** curl's exit code: 0 ok, 97 SOCKS/proxy handshake failure, 52 empty reply, 56 reset… */
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs curl with `args` (after `-sS --max-time`); never throws on a non-zero exit (the code is
 * the result). No inherited proxy variables: only the proxy the arguments name.
 */
export function curl(args: readonly string[], timeoutMs = 30_000): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      ['-sS', '--max-time', String(Math.ceil(timeoutMs / 1000)), ...args],
      { timeout: timeoutMs + 5000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
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

export interface CurlResponse {
  /** curl's exit code (see CurlResult.code). */
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
 * A GET through a tor SocksPort with the response split into status, headers and body,
 * hostname resolved by the exit: a TCP port, or the path of a Unix-socket SocksPort (curl's
 * socks5h://localhost/<path> form).
 */
export async function curlThroughSocks(socks: number | string, url: string, options: CurlThroughSocksOptions = {}): Promise<CurlResponse> {
  const proxy = typeof socks === 'number' ? ['--socks5-hostname', `127.0.0.1:${socks}`] : ['--proxy', `socks5h://localhost${socks}`];
  const args = ['-D', '-', ...proxy];
  if (options.username !== undefined) args.push('--proxy-user', `${options.username}:x`);
  args.push('-w', `${STATUS_MARKER}%{http_code}`, url);
  const started = Date.now();
  const r = await curl(args, (options.maxTimeSeconds ?? 30) * 1000);
  const markerAt = r.stdout.lastIndexOf(STATUS_MARKER);
  const status = markerAt >= 0 ? Number(r.stdout.slice(markerAt + STATUS_MARKER.length)) : 0;
  const response = markerAt >= 0 ? r.stdout.slice(0, markerAt) : r.stdout;
  const split = response.indexOf('\r\n\r\n');
  return {
    exitCode: r.code,
    httpStatus: status > 0 ? status : undefined,
    headers: split >= 0 ? response.slice(0, split) : '',
    body: split >= 0 ? response.slice(split + 4) : response,
    stderr: r.stderr,
    durationMs: Date.now() - started,
  };
}
