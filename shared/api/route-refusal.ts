/** Why a route is refused; the listeners map each to their protocol's reply. */
export type RouteRefusal =
  | 'no_routable_instance'
  | 'session_limit'
  /** The username asked for countries no usable exit is in (none in the catalog, or all banned). */
  | 'no_exit_in_country'
  /** An instance was being given an exit there and did not serve through it within COUNTRY_EXIT_WAIT_MS. */
  | 'country_wait_timeout';

/**
 * A session's last route refusal, as `GET /api/sessions/{key}/refusal` answers it: for clients
 * whose library hides what the proxy said when it refused (an HTTP client that reports a refused
 * CONNECT only as "503", a SOCKS client that shows no reply code). docs/api.md, "GET
 * /api/sessions/{key}/refusal".
 */
export interface SessionRefusalView {
  session: string;
  /** null when the supervisor refused no route for the key within RECENT_REFUSAL_TTL_MS. */
  refusal: RouteRefusalView | null;
}

export interface RouteRefusalView {
  reason: RouteRefusal;
  /** What the proxies said in words (Proxy-Status details, the HTTP body). */
  detail: string;
  /** When the supervisor refused it (ISO 8601, its clock). */
  at: string;
  /** Milliseconds between the refusal and this answer: compared with the client's own clock, never `at`. */
  age_ms: number;
  /** What the HTTP proxy answered: its status and the Proxy-Status `error` (RFC 9209). */
  http_status: number;
  proxy_status_error: string;
  /** What the SOCKS5 listener answered (RFC 1928 reply code). */
  socks_reply: number;
}

/**
 * How the listeners answer each refusal the supervisor decides, for the refusal view. The proxy
 * worker's own mapping (workers/proxy/http-proxy-errors.ts `routeRefusedResponse`,
 * workers/proxy/socks5-server.ts `socksReplyForRefusal`) is held to this table by
 * test/unit/recent-refusals.test.ts.
 */
export const REFUSAL_REPLIES: Readonly<Record<RouteRefusal, { httpStatus: number; proxyStatusError: string; socksReply: number; defaultDetail: string; keepsDetail: boolean }>> = {
  no_exit_in_country: { httpStatus: 503, proxyStatusError: 'destination_unavailable', socksReply: 3, defaultDetail: 'no exit in the countries asked for', keepsDetail: true },
  country_wait_timeout: {
    httpStatus: 503,
    proxyStatusError: 'destination_unavailable',
    socksReply: 3,
    defaultDetail: 'no exit in the countries asked for became ready in time; retry',
    keepsDetail: true,
  },
  no_routable_instance: { httpStatus: 503, proxyStatusError: 'destination_unavailable', socksReply: 1, defaultDetail: 'no instance can serve this request', keepsDetail: false },
  session_limit: { httpStatus: 503, proxyStatusError: 'connection_limit_reached', socksReply: 1, defaultDetail: 'session limit reached', keepsDetail: false },
};

/** The view of one refusal the supervisor recorded `ageMs` ago. */
export function routeRefusalView(reason: RouteRefusal, detail: string | undefined, at: number, ageMs: number): RouteRefusalView {
  const reply = REFUSAL_REPLIES[reason];
  return {
    reason,
    detail: reply.keepsDetail && detail !== undefined ? detail : reply.defaultDetail,
    at: new Date(at).toISOString(),
    age_ms: Math.max(0, ageMs),
    http_status: reply.httpStatus,
    proxy_status_error: reply.proxyStatusError,
    socks_reply: reply.socksReply,
  };
}
