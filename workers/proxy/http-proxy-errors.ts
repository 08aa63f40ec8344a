/**
 * Responses the HTTP proxy generates itself. Each carries an RFC 9209 Proxy-Status field naming
 * this proxy and the error type, and a plain-text body (docs/api.md, "Errors").
 */
import type { RouteRefusalReason } from './proxy-types.js';
import { isPrivateDestination } from './private-destination.js';
import { ReplyCode } from './socks5-protocol.js';
import type { SocksDialError } from './socks5-client.js';

/** The RFC 9209 error types this proxy uses. */
export type ProxyStatusErrorType =
  | 'destination_unavailable'
  | 'destination_not_found'
  | 'destination_ip_prohibited'
  | 'destination_ip_unroutable'
  | 'connection_refused'
  | 'connection_terminated'
  | 'connection_timeout'
  | 'connection_limit_reached'
  | 'dns_error'
  | 'http_request_error'
  | 'http_request_denied'
  | 'http_response_incomplete'
  | 'http_response_header_section_size'
  | 'http_response_timeout'
  | 'http_protocol_error'
  | 'proxy_internal_error';

export interface ProxyErrorResponse {
  status: number;
  error: ProxyStatusErrorType;
  /** Short human text, sent as the body and as the Proxy-Status details parameter. */
  message: string;
  extraFields?: ReadonlyArray<readonly [string, string]>;
}

export const PROXY_STATUS_NAME = 'exitpool';
export const PROXY_AUTH_REALM = 'exitpool';

const REASON_PHRASES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
};

/** An sf-string (RFC 8941): printable ASCII with " and \ escaped. */
function structuredString(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export function proxyStatusValue(error: ProxyStatusErrorType, details: string): string {
  return `${PROXY_STATUS_NAME}; error=${error}; details=${structuredString(details)}`;
}

/** Serialises a proxy-generated response; `keepAlive` decides the Connection field. */
export function serializeErrorResponse(response: ProxyErrorResponse, keepAlive: boolean): Buffer {
  const body = Buffer.from(`${response.message}\n`, 'utf8');
  let head = `HTTP/1.1 ${response.status} ${REASON_PHRASES[response.status] ?? 'Error'}\r\n`;
  head += `Proxy-Status: ${proxyStatusValue(response.error, response.message)}\r\n`;
  for (const [name, value] of response.extraFields ?? []) head += `${name}: ${value}\r\n`;
  head += `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\n`;
  head += keepAlive ? 'Connection: keep-alive\r\n\r\n' : 'Connection: close\r\n\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

export function proxyAuthenticationRequired(): ProxyErrorResponse {
  return {
    status: 407,
    error: 'http_request_denied',
    message: 'proxy authentication required',
    extraFields: [['Proxy-Authenticate', `Basic realm="${PROXY_AUTH_REALM}"`]],
  };
}

export function routeRefusedResponse(reason: RouteRefusalReason, detail?: string): ProxyErrorResponse {
  switch (reason) {
    case 'bad_session_params':
      return { status: 400, error: 'http_request_error', message: detail ?? 'session parameters in the username are malformed' };
    case 'no_exit_in_country':
      return { status: 503, error: 'destination_unavailable', message: detail ?? 'no exit in the countries asked for' };
    case 'country_wait_timeout':
      return { status: 503, error: 'destination_unavailable', message: detail ?? 'no exit in the countries asked for became ready in time; retry' };
    case 'no_routable_instance':
      return { status: 503, error: 'destination_unavailable', message: 'no instance can serve this request' };
    case 'session_limit':
      return { status: 503, error: 'connection_limit_reached', message: 'session limit reached' };
    case 'supervisor_unavailable':
      return { status: 503, error: 'proxy_internal_error', message: 'pool supervisor unavailable' };
  }
}

/** The worker holds MAX_CONNECTIONS_PER_WORKER connections already (connection-budget.ts). */
export function connectionLimitReached(): ProxyErrorResponse {
  return { status: 503, error: 'connection_limit_reached', message: 'proxy connection limit reached (MAX_CONNECTIONS_PER_WORKER); retry shortly' };
}

/** Maps a failed dial through an instance to a response; tor's reply code is named in the text. */
export function dialFailedResponse(error: SocksDialError, host: string): ProxyErrorResponse {
  if (error.kind === 'timeout') return { status: 504, error: 'connection_timeout', message: 'timed out connecting through the instance' };
  if (error.kind !== 'refused') {
    return { status: 502, error: 'destination_unavailable', message: 'instance SOCKS port unavailable' };
  }
  const code = error.replyCode ?? ReplyCode.GeneralFailure;
  const message = `destination refused through the network (SOCKS reply ${code})`;
  switch (code) {
    case ReplyCode.NotAllowedByRuleset:
      return { status: 502, error: 'destination_ip_prohibited', message };
    case ReplyCode.NetworkUnreachable:
      return { status: 502, error: 'destination_ip_unroutable', message };
    case ReplyCode.HostUnreachable:
      // tor answers 4 when the exit could not resolve the name.
      return isIpLiteralOrPrivate(host)
        ? { status: 502, error: 'destination_ip_unroutable', message }
        : { status: 502, error: 'dns_error', message };
    case ReplyCode.ConnectionRefused:
      return { status: 502, error: 'connection_refused', message };
    case ReplyCode.TtlExpired:
      return { status: 504, error: 'connection_timeout', message };
    case ReplyCode.CommandNotSupported:
    case ReplyCode.AddressTypeNotSupported:
      return { status: 502, error: 'proxy_internal_error', message };
    default:
      return { status: 502, error: 'destination_unavailable', message };
  }
}

function isIpLiteralOrPrivate(host: string): boolean {
  return host.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(host) || isPrivateDestination(host);
}
