import { CAPTCHA_MARKER } from '../../../internal/testnet/whoami-server.js';
import { curlSocks } from './curl.js';
import { TEST_PROXY_TOKEN, type RunningService } from '../fixtures/service.js';

/** What one request through a session saw at the destination. */
export type Fetched =
  | { kind: 'ip'; ip: string }
  | { kind: 'captcha' }
  | { kind: 'status'; status: number }
  | { kind: 'failed'; curlCode: number; stderr: string };

const STATUS_MARK = '\n@@status=';

/**
 * One request through the SOCKS5 listener under `key`, classified the way a scraping client
 * would (with `token` as the proxy credential): the exit's address (whoami answered), a captcha page, another HTTP status, or no answer.
 */
export async function fetchThroughSession(svc: RunningService, key: string, url = svc.whoamiUrl, token = TEST_PROXY_TOKEN): Promise<Fetched> {
  const r = await curlSocks(svc.socksPort, key, token, url, ['-w', `${STATUS_MARK}%{http_code}`]);
  if (r.code !== 0) return { kind: 'failed', curlCode: r.code, stderr: r.stderr.trim() };
  const at = r.stdout.lastIndexOf(STATUS_MARK);
  const body = r.stdout.slice(0, at);
  const status = Number(r.stdout.slice(at + STATUS_MARK.length));
  if (body.includes(CAPTCHA_MARKER)) return { kind: 'captcha' };
  if (status !== 200) return { kind: 'status', status };
  return { kind: 'ip', ip: body.trim() };
}

export class UnexpectedFetchError extends Error {
  constructor(key: string, got: Fetched) {
    super(`request through session ${key} did not reach whoami: ${JSON.stringify(got)}`);
    this.name = 'UnexpectedFetchError';
  }
}

/** A request that must reach whoami; returns the exit address it answered with. */
export async function exitIpOf(svc: RunningService, key: string, token = TEST_PROXY_TOKEN): Promise<string> {
  const got = await fetchThroughSession(svc, key, svc.whoamiUrl, token);
  if (got.kind !== 'ip') throw new UnexpectedFetchError(key, got);
  return got.ip;
}
