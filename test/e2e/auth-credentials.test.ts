/**
 * Authentication end to end (issue 5) on one service of 1 instance: tokens on both proxy
 * listeners, immediate revocation, scopes on the API, sign-in credentials and stream tickets.
 * AUTH_DISABLED is covered in proxy-credential-free.test.ts.
 */
import { expect } from 'chai';
import http from 'node:http';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { apiJson, whoamiIp } from '../support/clients/api-reads.js';
import { httpProxyGet } from '../support/clients/http-proxy-client.js';
import { openSocksTunnel } from '../support/clients/socks5-client.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

interface CreatedToken {
  id: string;
  name: string;
  scope: 'proxy' | 'admin';
  source: string;
  created_at: number;
  secret: string;
}

const TOKEN_SECRET = /^tp_[A-Za-z0-9]{22}$/;
const ADMIN_ROUTES = ['/api/pool', '/api/instances'];

describe('authentication on the proxy listeners and the API', function () {
  this.timeout(240_000);
  let signIn: string;

  const whoamiTarget = (): { host: string; targetPort: number } => ({ host: 'whoami.testnet', targetPort: suite.svc.net.whoami.port });

  /** Both listeners carry a request for `key` with `secret` as the password (curl). */
  const expectProxiesAccept = async (key: string, secret: string): Promise<void> => {
    const viaSocks = await curlSocks(suite.svc.socksPort, key, secret, suite.svc.whoamiUrl);
    expect(viaSocks.code, `SOCKS5: ${viaSocks.stderr}`).to.equal(0);
    whoamiIp(viaSocks.stdout);
    const viaHttp = await curlHttp(suite.svc.httpPort, key, secret, suite.svc.whoamiUrl);
    expect(viaHttp.code, `HTTP proxy: ${viaHttp.stderr}`).to.equal(0);
    whoamiIp(viaHttp.stdout);
  };

  /** Both listeners refuse `secret`: in the SOCKS5 handshake, and with 407 + Proxy-Authenticate. */
  const expectProxiesRefuse = async (key: string, secret: string): Promise<void> => {
    const raw = await openSocksTunnel({ port: suite.svc.socksPort, ...whoamiTarget(), username: key, password: secret });
    expect(raw, 'SOCKS5 handshake').to.deep.include({ kind: 'refused', step: 'auth' });
    const viaCurl = await curlSocks(suite.svc.socksPort, key, secret, suite.svc.whoamiUrl);
    expect(viaCurl.code, 'curl through SOCKS5 must fail').to.not.equal(0);
    const viaHttp = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: { username: key, password: secret } });
    expect(viaHttp.status).to.equal(407);
    expect(viaHttp.headers['proxy-authenticate']).to.match(/^Basic realm=/);
    const viaCurlHttp = await curlHttp(suite.svc.httpPort, key, secret, suite.svc.whoamiUrl, ['-o', '/dev/null', '-w', '%{http_code}']);
    expect(viaCurlHttp.stdout.trim()).to.equal('407');
  };

  const createToken = (name: string, scope: 'proxy' | 'admin'): Promise<CreatedToken> =>
    apiJson<CreatedToken>(suite.svc, '/api/tokens', signIn, { method: 'POST', body: { name, scope }, expected: 201 });

  const suite = withService({ POOL_SIZE: '1' }, { ready: 1, readyTimeoutMs: 120_000 });
  before(async () => {
    signIn = await suite.svc.login();
  });


  it('reports that a credential is required', async () => {
    const status = await apiJson<{ required: boolean; user: string }>(suite.svc, '/api/auth/status', undefined);
    expect(status).to.deep.equal({ required: true, user: 'admin' });
  });

  it('accepts the proxy token on both listeners', async () => {
    await expectProxiesAccept('auth-key', TEST_PROXY_TOKEN);
  });

  it('refuses a missing or unknown credential on both listeners', async () => {
    const noAuth = await openSocksTunnel({ port: suite.svc.socksPort, ...whoamiTarget(), username: null });
    expect(noAuth, 'SOCKS5 without a credential').to.deep.include({ kind: 'refused', step: 'method', code: 0xff });
    const noUser = await curlSocks(suite.svc.socksPort, null, null, suite.svc.whoamiUrl);
    expect(noUser.code, 'curl through SOCKS5 without a credential must fail').to.not.equal(0);
    const noHeader = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: null });
    expect(noHeader.status).to.equal(407);
    expect(noHeader.headers['proxy-authenticate']).to.match(/^Basic realm=/);
    expect(noHeader.headers['proxy-status']).to.match(/^exitpool; /);
    await expectProxiesRefuse('auth-key', 'tp_NotARealToken0000000000');
  });

  it('accepts a token created through the API at once, and refuses it at once once revoked', async () => {
    const token = await createToken('e2e-proxy', 'proxy');
    expect(token.secret).to.match(TOKEN_SECRET);
    expect(token).to.include({ name: 'e2e-proxy', scope: 'proxy', source: 'store' });
    await expectProxiesAccept('revocable', token.secret);

    // A keep-alive connection authenticated with the token before the revocation...
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const credential = { username: 'revocable', password: token.secret };
      const before = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential, agent });
      expect(before.status, before.body).to.equal(200);

      const revoke = await suite.svc.api(`/api/tokens/${token.id}`, { method: 'DELETE', bearer: signIn });
      expect(revoke.status).to.equal(204);
      // No wait: the revocation is in force on every worker before DELETE answers.
      await expectProxiesRefuse('revocable', token.secret);
      // ...has its next request refused too: every request on the connection is authenticated.
      const afterRevoke = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential, agent });
      expect(afterRevoke.socket, 'same keep-alive connection').to.equal(before.socket);
      expect(afterRevoke.status).to.equal(407);
      expect(afterRevoke.headers['proxy-authenticate']).to.match(/^Basic realm=/);
    } finally {
      agent.destroy();
    }
    const listed = await apiJson<Array<{ id: string; secret?: string }>>(suite.svc, '/api/tokens', signIn);
    expect(listed.map((t) => t.id)).to.not.include(token.id);
    for (const t of listed) expect(t).to.not.have.property('secret');
    const asBearer = await suite.svc.api('/api/sessions/revocable', { bearer: token.secret });
    expect(asBearer.status).to.equal(401);
    expect(asBearer.headers.get('www-authenticate')).to.match(/^Bearer /);
  });

  it('lets an admin token and a sign-in credential call admin routes', async () => {
    const adminToken = await createToken('e2e-admin', 'admin');
    expect(adminToken.secret).to.match(TOKEN_SECRET);
    for (const bearer of [adminToken.secret, signIn]) {
      for (const path of ADMIN_ROUTES) {
        const r = await suite.svc.api(path, { bearer });
        expect(r.status, `${path} with ${bearer === signIn ? 'sign-in credential' : 'admin token'}`).to.equal(200);
      }
    }
    // The admin scope includes proxy traffic.
    await expectProxiesAccept('admin-key', adminToken.secret);
  });

  it('gives a proxy token 403 (without WWW-Authenticate) on admin routes and 200 on its session', async () => {
    for (const path of ADMIN_ROUTES) {
      const r = await suite.svc.api(path, { bearer: TEST_PROXY_TOKEN });
      expect(r.status, path).to.equal(403);
      expect(r.headers.get('www-authenticate'), `${path}: no challenge on 403`).to.equal(null);
    }
    const session = await suite.svc.api('/api/sessions/auth-key', { bearer: TEST_PROXY_TOKEN });
    expect(session.status).to.equal(200);
    expect(((await session.json()) as { key: string }).key).to.equal('auth-key');
  });

  it('answers a missing or invalid credential with 401 and WWW-Authenticate', async () => {
    for (const path of [...ADMIN_ROUTES, '/api/sessions/auth-key', '/api/no-such-route']) {
      const missing = await suite.svc.api(path);
      expect(missing.status, path).to.equal(401);
      expect(missing.headers.get('www-authenticate'), path).to.match(/^Bearer realm=/);
      const invalid = await suite.svc.api(path, { bearer: 'tp_NotARealToken0000000000' });
      expect(invalid.status, path).to.equal(401);
      expect(invalid.headers.get('www-authenticate'), path).to.match(/^Bearer realm=.*error="invalid_token"/);
    }
  });

  it('lets a ticket open the stream only, and never mint another ticket', async () => {
    const minted = await apiJson<{ ticket: string; expires_in: number }>(suite.svc, '/api/auth/ticket', signIn, { method: 'POST' });
    expect(minted.expires_in).to.equal(60);
    const ticket = encodeURIComponent(minted.ticket);

    const abort = new AbortController();
    try {
      const stream = await fetch(`http://127.0.0.1:${suite.svc.apiPort}/api/stream?ticket=${ticket}`, { signal: abort.signal });
      expect(stream.status).to.equal(200);
      expect(stream.headers.get('content-type')).to.match(/^text\/event-stream/);
      const first = await stream.body?.getReader().read();
      expect(first?.done).to.equal(false);
    } finally {
      abort.abort();
    }

    const onPool = await suite.svc.api(`/api/pool?ticket=${ticket}`);
    expect(onPool.status).to.equal(401);
    expect(onPool.headers.get('www-authenticate')).to.match(/^Bearer /);
    const asBearerOnPool = await suite.svc.api('/api/pool', { bearer: minted.ticket });
    expect(asBearerOnPool.status).to.equal(401);
    const mintByQuery = await suite.svc.api(`/api/auth/ticket?ticket=${ticket}`, { method: 'POST' });
    expect(mintByQuery.status).to.equal(401);
    const mintByBearer = await suite.svc.api('/api/auth/ticket', { method: 'POST', bearer: minted.ticket });
    expect(mintByBearer.status).to.equal(401);
    // A proxy token cannot mint one either.
    const byProxyToken = await suite.svc.api('/api/auth/ticket', { method: 'POST', bearer: TEST_PROXY_TOKEN });
    expect(byProxyToken.status).to.equal(403);
  });
});
