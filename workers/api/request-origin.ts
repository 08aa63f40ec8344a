import { isIP } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { HttpError } from './http-error.js';

/**
 * Which requests may reach the API at all, whatever their credential (and with AUTH_DISABLED,
 * where there is none): two browser attacks on a service bound to a trusted address.
 *
 * DNS rebinding: a page on attacker.example re-resolves its own name to 127.0.0.1 and then talks
 * to us as a same-origin page, with `Host: attacker.example`. So the Host must be one we answer
 * to: an IP literal (a rebinding attack needs a name), `localhost` or a `*.localhost` name (they
 * never resolve off the host), BIND_HOST when it is a name, or a name in API_ALLOWED_HOSTS (`*`
 * turns the check off, for operators whose own reverse proxy checks Host).
 *
 * Cross-site requests (CSRF): a form or a `no-cors` fetch from another site can send a POST
 * (`text/plain` needs no preflight) that the browser delivers. Browsers say where a request comes
 * from: `Sec-Fetch-Site` (anything but `same-origin`, or `none` for a typed address, is another
 * page: `same-site` too, since another port of this host is another origin) and `Origin`, which
 * must name the host the request was sent to. Requests with neither header come from non-browser
 * clients (curl, scripts, the client libraries), which a page cannot forge, and pass.
 */

export interface RequestOriginPolicy {
  bindHost: string;
  /** API_ALLOWED_HOSTS: lowercase names; `*` allows every Host. */
  allowedHosts: readonly string[];
}

/** Methods a page may trigger cross-site without them changing anything (they change nothing here). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Sec-Fetch-Site values of a request the page itself made, or a user typed. */
const OWN_FETCH_SITES = new Set(['same-origin', 'none']);
/** Wildcard bind addresses are not names a client sends. */
const WILDCARD_BIND_HOSTS = new Set(['0.0.0.0', '::', '[::]']);

/** The host part of a Host header value (no port, no IPv6 brackets, lowercase, no trailing dot); null when malformed. */
export function hostOf(header: string): string | null {
  const value = header.trim().toLowerCase();
  if (value === '') return null;
  let host: string;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0) return null;
    host = value.slice(1, end);
    const rest = value.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return null;
    return isIP(host) === 6 ? host : null;
  }
  const colon = value.indexOf(':');
  host = colon < 0 ? value : value.slice(0, colon);
  if (colon >= 0 && !/^\d{1,5}$/.test(value.slice(colon + 1))) return null;
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (!/^[a-z0-9_.-]{1,253}$/.test(host)) return null;
  return host;
}

export function hostAllowed(header: string | undefined, policy: RequestOriginPolicy): boolean {
  // HTTP/1.0 clients may send none; every browser sends one.
  if (header === undefined) return true;
  if (policy.allowedHosts.includes('*')) return true;
  const host = hostOf(header);
  if (host === null) return false;
  if (isIP(host) !== 0) return true;
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const bind = policy.bindHost.toLowerCase();
  if (!WILDCARD_BIND_HOSTS.has(bind) && host === bind) return true;
  return policy.allowedHosts.includes(host);
}

/** Why a state-changing request is refused as cross-site, or null when it may proceed. */
export function crossSiteReason(req: { method: string; headers: Record<string, string | string[] | undefined> }): string | null {
  if (SAFE_METHODS.has(req.method.toUpperCase())) return null;
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string' && !OWN_FETCH_SITES.has(site.trim().toLowerCase())) return `Sec-Fetch-Site is ${site}`;
  const origin = req.headers.origin;
  if (typeof origin === 'string') {
    const host = req.headers.host;
    if (origin === 'null') return 'Origin is null';
    let originHost: string;
    try {
      originHost = new URL(origin).host.toLowerCase();
    } catch {
      return 'Origin is malformed';
    }
    if (typeof host !== 'string' || originHost !== host.trim().toLowerCase()) return `Origin ${origin} is not this service`;
  }
  return null;
}

/** Express middleware applying both checks to every request, before authentication. */
export function requestOriginGuard(policy: RequestOriginPolicy): (req: Request, res: Response, next: NextFunction) => void {
  return (req, _res, next) => {
    if (!hostAllowed(req.headers.host, policy)) {
      throw new HttpError(403, `Host ${JSON.stringify(String(req.headers.host).slice(0, 100))} is not one this API answers to (DNS rebinding guard): use its address, localhost, or add the name to API_ALLOWED_HOSTS`);
    }
    const reason = crossSiteReason(req);
    if (reason !== null) throw new HttpError(403, `cross-site request refused (${reason}): state-changing API calls must come from the dashboard's own page or a non-browser client`);
    next();
  };
}
