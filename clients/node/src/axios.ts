/**
 * `@exitpool/client/axios`: axios through an exitpool session, with the same block handling as
 * `fetch`. axios is not a dependency of this package: pass yours in. The HTTP proxy goes through
 * `http-proxy-agent` and `https-proxy-agent`, SOCKS5 through `socks-proxy-agent` (optional peer
 * dependencies): axios's own `proxy` option cannot tunnel https:// (it would send the request to
 * the proxy in the clear, which exitpool refuses).
 */
import './node-version.js';
import type { AxiosInstance, AxiosRequestConfig, AxiosResponse, AxiosStatic } from 'axios';
import { keptHttpProxyAgents, keptSocksAgent } from './agents.js';
import type { ExitpoolSession } from './exitpool-session.js';

/**
 * A request with axios, through the session: the HTTP proxy by default, or SOCKS5 when
 * `socksAddress` is given. The session keeps the agents (kept-alive connections, dropped when the
 * session moves).
 */
export async function axiosThrough(
  axios: AxiosStatic | AxiosInstance,
  session: ExitpoolSession,
  config: AxiosRequestConfig & { url: string },
  socksAddress?: string,
): Promise<AxiosResponse<string>> {
  return session.attempt(
    config.url,
    async () => {
      const agents = socksAddress === undefined ? await keptHttpProxyAgents(session) : await keptSocksAgent(session, socksAddress).then((a) => ({ http: a, https: a }));
      const response = await axios.request<string>({ ...config, responseType: 'text', validateStatus: () => true, httpAgent: agents.http, httpsAgent: agents.https, proxy: false });
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) if (typeof value === 'string') headers[name.toLowerCase()] = value;
      return { status: response.status, headers, body: String(response.data ?? ''), redirectedTo: axiosRedirectedTo(response, config.url), value: response };
    },
    socksAddress === undefined ? 'http' : 'socks5',
  );
}

/**
 * Where axios's followed redirects led: follow-redirects leaves the final URL on the last
 * response (`request.res.responseUrl`); only the final one is kept.
 */
function axiosRedirectedTo(response: AxiosResponse<string>, requested: string): string[] {
  const final = (response.request as { res?: { responseUrl?: unknown } } | undefined)?.res?.responseUrl;
  if (typeof final !== 'string' || final === '') return [];
  let asked: string;
  try {
    asked = new URL(requested, final).href;
  } catch {
    return [];
  }
  return new URL(final).href === asked ? [] : [final];
}
