/**
 * What the proxy said when it refused a request, as typed errors: the HTTP proxy's
 * `Proxy-Status` (RFC 9209) and the SOCKS5 reply code.
 */

/** `Proxy-Status: exitpool; error=<type>; details="<text>"` split into its parts. */
export interface ProxyStatus {
  proxy: string;
  error: string;
  details: string;
}

export function parseProxyStatus(value: string | null | undefined): ProxyStatus | null {
  if (!value) return null;
  const [proxy = '', ...params] = value.split(';').map((p) => p.trim());
  let error = '';
  let details = '';
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    const name = p.slice(0, eq).trim();
    let v = p.slice(eq + 1).trim();
    if (v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1).replace(/\\(["\\])/g, '$1');
    if (name === 'error') error = v;
    else if (name === 'details') details = v;
  }
  return { proxy, error, details };
}

/** The HTTP proxy refused the request itself (the destination never saw it). */
export class ProxyRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly proxyStatus: ProxyStatus,
  ) {
    super(`exitpool refused the request (${status} ${proxyStatus.error}): ${proxyStatus.details}`);
    this.name = 'ProxyRefusedError';
  }

  /** The username's parameters were malformed (HTTP 400). */
  get badParameters(): boolean {
    return this.status === 400;
  }

  /** Worth retrying later: the pool was busy (503), not a country without any exit or a bad request. */
  get retryable(): boolean {
    return this.status === 503 && !this.proxyStatus.details.startsWith('no exit in');
  }
}

/** SOCKS5 reply codes (RFC 1928) as exitpool uses them before any dial. */
export const SOCKS_REPLY_REASONS: Record<number, string> = {
  1: 'general failure (no instance can serve the request)',
  2: 'not allowed by ruleset (malformed session parameters in the username)',
  3: 'network unreachable (no exit in the countries asked for)',
  4: 'host unreachable',
  5: 'connection refused by the destination',
};

export class SocksReplyError extends Error {
  constructor(readonly code: number) {
    super(`the SOCKS5 proxy refused the connection: reply ${code}, ${SOCKS_REPLY_REASONS[code] ?? 'unknown'}`);
    this.name = 'SocksReplyError';
  }
}

/** The reply names the `socks` package (under socks-proxy-agent) puts in its errors, by code. */
const SOCKS_PACKAGE_REPLY_NAMES: Record<string, number> = {
  Failure: 1,
  NotAllowed: 2,
  NetworkUnreachable: 3,
  HostUnreachable: 4,
  ConnectionRefused: 5,
  TTLExpired: 6,
  CommandNotSupported: 7,
  AddressNotSupported: 8,
};

/** The SOCKS5 reply behind a client library's error ("Socks5 proxy rejected connection - NetworkUnreachable"), or null. */
export function socksReplyOf(error: unknown): SocksReplyError | null {
  const text = error instanceof Error ? `${error.message} ${String((error as { cause?: unknown }).cause ?? '')}` : String(error);
  const m = /Socks5 proxy rejected connection - (\w+)/.exec(text);
  const code = m ? SOCKS_PACKAGE_REPLY_NAMES[m[1] as string] : undefined;
  return code === undefined ? null : new SocksReplyError(code);
}
