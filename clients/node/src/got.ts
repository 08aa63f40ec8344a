/**
 * `@exitpool/client/got`: got through an exitpool session, with the same block handling as
 * `fetch`. got is not a dependency of this package: pass yours in. SOCKS5 needs
 * `socks-proxy-agent`, the HTTP proxy `http-proxy-agent` and `https-proxy-agent` (optional peer
 * dependencies, loaded when first used).
 */
import './node-version.js';
import type { Got, OptionsInit, Response as GotResponse } from 'got';
import { keptHttpProxyAgents, keptSocksAgent } from './agents.js';
import type { ExitpoolSession, JudgedResponse } from './exitpool-session.js';

function judged(response: GotResponse<string>): JudgedResponse<GotResponse<string>> {
  return { status: response.statusCode, headers: response.headers, body: response.body, redirectedTo: response.redirectUrls.map(String), value: response };
}

const AS_IS = { throwHttpErrors: false, retry: { limit: 0 }, responseType: 'text', resolveBodyOnly: false } as const;

/**
 * A GET (or any `options.method`) with got, through the session's SOCKS5 username. The session
 * keeps one agent, so requests ride kept-alive connections; a move drops it.
 */
export async function gotThrough(got: Got, session: ExitpoolSession, socksAddress: string, url: string, options: OptionsInit = {}): Promise<GotResponse<string>> {
  return session.attempt(
    url,
    async () => {
      const agent = await keptSocksAgent(session, socksAddress);
      return judged((await got(url, { ...options, agent: { http: agent, https: agent }, ...AS_IS })) as GotResponse<string>);
    },
    'socks5',
  );
}

/**
 * A GET (or any `options.method`) with got, through the session's HTTP proxy. The session keeps
 * the agents, as over SOCKS5: kept-alive connections, dropped when the session moves. A refused
 * CONNECT comes back as the proxy's own answer (https-proxy-agent passes it on), read as
 * ProxyRefusedError.
 */
export async function gotThroughHttpProxy(got: Got, session: ExitpoolSession, url: string, options: OptionsInit = {}): Promise<GotResponse<string>> {
  return session.attempt(url, async () => judged((await got(url, { ...options, agent: await keptHttpProxyAgents(session), ...AS_IS })) as GotResponse<string>), 'http');
}
