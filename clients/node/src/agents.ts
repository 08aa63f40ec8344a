/**
 * `@exitpool/client/agents`: Node `http.Agent`s for a session, for any client that takes one.
 * SOCKS5 goes through `socks-proxy-agent`, the HTTP proxy through `http-proxy-agent` (http://
 * URLs in absolute form, so the proxy's own answer reaches the client) and `https-proxy-agent`
 * (CONNECT; a refused CONNECT comes back as the proxy's response, `Proxy-Status` included).
 * Optional peer dependencies, loaded when first used.
 */
import './node-version.js';
import type { HttpProxyAgent } from 'http-proxy-agent';
import type { HttpsProxyAgent } from 'https-proxy-agent';
import type { SocksProxyAgent } from 'socks-proxy-agent';
import type { ExitpoolSession } from './exitpool-session.js';

/**
 * A SOCKS5 agent for the session (names resolved by the exit), for any client that takes an
 * `http.Agent`; keep-alive, so its connections are reused (destroy it, or move the session, to end them).
 */
export async function socksAgent(session: ExitpoolSession, socksAddress: string): Promise<SocksProxyAgent> {
  const { SocksProxyAgent: Agent } = await import('socks-proxy-agent');
  return new Agent(session.proxyUrl('socks5h', socksAddress), { keepAlive: true });
}

/** The session's kept SOCKS5 agent for `socksAddress` (ExitpoolSession.keptAgent: dropped when the session moves). */
export function keptSocksAgent(session: ExitpoolSession, socksAddress: string): Promise<SocksProxyAgent> {
  return session.keptAgent(`socks5h:${socksAddress}`, () => socksAgent(session, socksAddress));
}

/** The session's HTTP proxy agents for a client that takes one per scheme. */
export async function httpProxyAgents(session: ExitpoolSession): Promise<{ http: HttpProxyAgent<string>; https: HttpsProxyAgent<string> }> {
  const [{ HttpProxyAgent: ForHttp }, { HttpsProxyAgent: ForHttps }] = await Promise.all([import('http-proxy-agent'), import('https-proxy-agent')]);
  const url = session.proxyUrl('http');
  return { http: new ForHttp(url, { keepAlive: true }), https: new ForHttps(url, { keepAlive: true }) };
}

/** The session's kept HTTP proxy agents (dropped when the session moves). */
export async function keptHttpProxyAgents(session: ExitpoolSession): Promise<{ http: HttpProxyAgent<string>; https: HttpsProxyAgent<string> }> {
  const { agents } = await session.keptAgent('http-proxy', async () => {
    const made = await httpProxyAgents(session);
    return {
      agents: made,
      destroy: () => {
        made.http.destroy();
        made.https.destroy();
      },
    };
  });
  return agents;
}
