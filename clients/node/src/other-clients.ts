import type { Got, OptionsInit, Response as GotResponse } from 'got';
import type { AxiosInstance, AxiosRequestConfig, AxiosResponse, AxiosStatic } from 'axios';
import type { SocksProxyAgent } from 'socks-proxy-agent';
import type { HttpProxyAgent } from 'http-proxy-agent';
import type { HttpsProxyAgent } from 'https-proxy-agent';
import type { ExitpoolSession } from './exitpool-session.js';
import { socksReplyOf } from './proxy-refusal.js';

/**
 * got and axios through an exitpool session, with the same block handling as `fetch`. Neither
 * library is a dependency of this package: pass yours in. SOCKS5 goes through
 * `socks-proxy-agent`, got's HTTP proxy through `http-proxy-agent` and `https-proxy-agent`
 * (optional peer dependencies, loaded when first used); axios uses the HTTP proxy with its own
 * `proxy` option.
 */

/**
 * A SOCKS5 agent for the session (names resolved by the exit), for any client that takes an
 * `http.Agent`; keep-alive, so its connections are reused (destroy it, or rotate, to end them).
 */
export async function socksAgent(session: ExitpoolSession, socksAddress: string): Promise<SocksProxyAgent> {
  const { SocksProxyAgent: Agent } = await import('socks-proxy-agent');
  return new Agent(session.proxyUrl('socks5h', socksAddress), { keepAlive: true });
}

/** The session's kept SOCKS5 agent for `socksAddress` (ExitpoolSession.keptAgent: dropped on rotation). */
function keptSocksAgent(session: ExitpoolSession, socksAddress: string): Promise<SocksProxyAgent> {
  return session.keptAgent(`socks5h:${socksAddress}`, () => socksAgent(session, socksAddress));
}

/**
 * A GET (or any `options.method`) with got, through the session's SOCKS5 username. The session
 * keeps one agent, so requests ride kept-alive connections; a rotation drops it.
 */
export async function gotThrough(got: Got, session: ExitpoolSession, socksAddress: string, url: string, options: OptionsInit = {}): Promise<GotResponse<string>> {
  return session.attempt(url, async () => {
    const agent = await keptSocksAgent(session, socksAddress);
    try {
      const response = (await got(url, { ...options, agent: { http: agent, https: agent }, throwHttpErrors: false, retry: { limit: 0 }, responseType: 'text', resolveBodyOnly: false })) as GotResponse<string>;
      return { status: response.statusCode, headers: response.headers, body: response.body, redirectedTo: response.redirectUrls.map(String), value: response };
    } catch (error) {
      throw socksReplyOf(error) ?? error;
    }
  });
}

/**
 * The session's HTTP proxy agents for a client that takes one per scheme: `http:` URLs are sent
 * to the proxy in absolute form (so its answer, `Exitpool-Exit` and `Proxy-Status` included,
 * reaches the client), `https:` ones through a CONNECT tunnel.
 */
export async function httpProxyAgents(session: ExitpoolSession): Promise<{ http: HttpProxyAgent<string>; https: HttpsProxyAgent<string> }> {
  const [{ HttpProxyAgent: ForHttp }, { HttpsProxyAgent: ForHttps }] = await Promise.all([import('http-proxy-agent'), import('https-proxy-agent')]);
  const url = session.proxyUrl('http');
  return { http: new ForHttp(url, { keepAlive: true }), https: new ForHttps(url, { keepAlive: true }) };
}

/**
 * A GET (or any `options.method`) with got, through the session's HTTP proxy. The session keeps
 * the agents, as over SOCKS5: kept-alive connections, dropped on rotation.
 */
export async function gotThroughHttpProxy(got: Got, session: ExitpoolSession, url: string, options: OptionsInit = {}): Promise<GotResponse<string>> {
  return session.attempt(url, async () => {
    const { agents } = await session.keptAgent('http-proxy', async () => {
      const kept = await httpProxyAgents(session);
      return {
        agents: kept,
        destroy: () => {
          kept.http.destroy();
          kept.https.destroy();
        },
      };
    });
    const response = (await got(url, { ...options, agent: agents, throwHttpErrors: false, retry: { limit: 0 }, responseType: 'text', resolveBodyOnly: false })) as GotResponse<string>;
    return { status: response.statusCode, headers: response.headers, body: response.body, redirectedTo: response.redirectUrls.map(String), value: response };
  });
}

/**
 * A request with axios, through the session: the HTTP proxy by default, or SOCKS5 when
 * `socksAddress` is given.
 */
export async function axiosThrough(
  axios: AxiosStatic | AxiosInstance,
  session: ExitpoolSession,
  config: AxiosRequestConfig & { url: string },
  socksAddress?: string,
): Promise<AxiosResponse<string>> {
  return session.attempt(config.url, async () => {
    const agent = socksAddress === undefined ? undefined : await keptSocksAgent(session, socksAddress);
    const proxy = new URL(session.proxyUrl('http'));
    const response = await axios
      .request<string>({
      ...config,
      responseType: 'text',
      validateStatus: () => true,
      ...(agent
        ? { httpAgent: agent, httpsAgent: agent, proxy: false }
        : { proxy: { protocol: 'http', host: proxy.hostname, port: Number(proxy.port), auth: { username: decodeURIComponent(proxy.username), password: decodeURIComponent(proxy.password) } } }),
      })
      .catch((error: unknown) => {
        throw socksReplyOf(error) ?? error;
      });
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(response.headers)) if (typeof value === 'string') headers[name.toLowerCase()] = value;
    return { status: response.status, headers, body: String(response.data ?? ''), redirectedTo: axiosRedirectedTo(response, config.url), value: response };
  });
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
