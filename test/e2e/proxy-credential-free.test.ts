/**
 * Credential-free proxying end to end: AUTH_DISABLED with the default DEFAULT_SESSION (ip) and
 * session ports (SESSION_PORT_BASE), on one service of 2 instances.
 */
import { expect } from 'chai';
import type { PoolSummary, SessionView } from '../../shared/api/views.js';
import { curl, curlSocks } from '../support/clients/curl.js';
import { apiJson, instanceView, instanceWhen, sessionView, sessionWhen, whoamiIp } from '../support/clients/api-reads.js';
import { httpProxyGet } from '../support/clients/http-proxy-client.js';
import { freeSessionPortBase } from '../support/network/free-ports.js';
import { socksHttpGet } from '../support/clients/socks5-client.js';
import { startService, type RunningService } from '../support/fixtures/service.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';

const POOL_SIZE = 2;
/** The session DEFAULT_SESSION=ip gives a loopback caller that names none. */
const LOOPBACK_IP_SESSION = 'ip:127.0.0.1';

describe('credential-free proxying: AUTH_DISABLED, DEFAULT_SESSION=ip and session ports', function () {
  this.timeout(240_000);
  let svc: RunningService;
  let base: number;
  /** Under AUTH_DISABLED any bearer (or none) is accepted; the fixture's login still works. */
  let bearer: string;

  before(async () => {
    // The network binds its own port block when it starts: let it, then pick free session ports.
    await sharedTestnet();
    base = await freeSessionPortBase(POOL_SIZE);
    svc = await startService({ POOL_SIZE: String(POOL_SIZE), AUTH_DISABLED: '1', SESSION_PORT_BASE: String(base) });
    await svc.waitReady(POOL_SIZE, 120_000);
    bearer = await svc.login();
  });

  after(async () => {
    expect(await svc?.stop()).to.equal(0);
  });

  it('reports that no credential is required, and answers the API without one', async () => {
    const status = await apiJson<{ required: boolean; user: string }>(svc, '/api/auth/status', undefined);
    expect(status.required).to.equal(false);
    const pool = await apiJson<PoolSummary>(svc, '/api/pool', undefined);
    expect(pool.config.default_session).to.equal('ip');
  });

  it('lets a SOCKS5 client with no username or password through (curl --socks5-hostname)', async () => {
    const r = await curl(['--socks5-hostname', `127.0.0.1:${svc.socksPort}`, svc.whoamiUrl]);
    expect(r.code, r.stderr).to.equal(0);
    whoamiIp(r.stdout);
  });

  it('pins callers that name no session by client IP (DEFAULT_SESSION=ip) on both listeners', async () => {
    const before = (await sessionView(svc, LOOPBACK_IP_SESSION, undefined))?.requests ?? 0;
    const target = { host: 'whoami.testnet', targetPort: svc.net.whoami.port };
    const raw = await socksHttpGet({ port: svc.socksPort, ...target });
    expect(raw.outcome.kind).to.equal('open');
    const viaCurl = await curl(['--socks5-hostname', `127.0.0.1:${svc.socksPort}`, svc.whoamiUrl]);
    expect(viaCurl.code, viaCurl.stderr).to.equal(0);
    const viaHttp = await httpProxyGet({ proxyPort: svc.httpPort, url: svc.whoamiUrl, credential: null });
    expect(viaHttp.status, viaHttp.body).to.equal(200);
    const ips = [whoamiIp(raw.body), whoamiIp(viaCurl.stdout), whoamiIp(viaHttp.body)];
    expect(new Set(ips), ips.join(' ')).to.have.lengthOf(1);

    const s = await sessionWhen(svc, LOOPBACK_IP_SESSION, bearer, 'the three requests accounted', (v) => v.requests >= before + 3);
    await instanceWhen(svc, s.instance, bearer, `exit confirmed as ${ips[0]}`, (v) => v.exit_confirmed && v.exit_ip === ips[0]);

    // Another client address is another session.
    const other = await socksHttpGet({ port: svc.socksPort, ...target, localAddress: '127.0.0.2' });
    expect(other.outcome.kind).to.equal('open');
    whoamiIp(other.body);
    await sessionWhen(svc, 'ip:127.0.0.2', bearer, 'its request accounted', (v) => v.requests >= 1);
    const keys = (await apiJson<SessionView[]>(svc, '/api/sessions', bearer)).map((v) => v.key);
    expect(keys).to.include.members([LOOPBACK_IP_SESSION, 'ip:127.0.0.2']);
  });

  it('keeps a username a credential-free client sends as its session key', async () => {
    const r = await curlSocks(svc.socksPort, 'named-without-token', 'anything', svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    const s = await sessionWhen(svc, 'named-without-token', bearer, 'accounted', (v) => v.requests >= 1);
    expect(s.session_port).to.equal(base + s.instance);
  });

  for (let n = 0; n < POOL_SIZE; n++) {
    it(`pins session port base+${n} to instance ${n} and accounts its traffic under the instance, not a session`, async () => {
      const sessionsBefore = (await apiJson<SessionView[]>(svc, '/api/sessions', bearer)).map((v) => ({ key: v.key, requests: v.requests }));
      const instanceBefore = await instanceView(svc, n, bearer);
      const ips: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await curl(['--socks5-hostname', `127.0.0.1:${base + n}`, svc.whoamiUrl]);
        expect(r.code, r.stderr).to.equal(0);
        ips.push(whoamiIp(r.stdout));
      }
      // A username sent to a session port is read and ignored: still pinned, still no session.
      const named = await curlSocks(base + n, 'ignored-on-session-port', 'x', svc.whoamiUrl);
      expect(named.code, named.stderr).to.equal(0);
      ips.push(whoamiIp(named.stdout));
      expect(new Set(ips), ips.join(' ')).to.have.lengthOf(1);

      const after = await instanceWhen(svc, n, bearer, 'the 4 requests accounted', (v) => v.totals.requests >= instanceBefore.totals.requests + 4);
      expect(after.totals.requests).to.equal(instanceBefore.totals.requests + 4);
      await instanceWhen(svc, n, bearer, `exit confirmed as ${ips[0]}`, (v) => v.exit_confirmed && v.exit_ip === ips[0]);

      // No session was created or charged, the caller's ip: session included.
      const sessionsAfter = (await apiJson<SessionView[]>(svc, '/api/sessions', bearer)).map((v) => ({ key: v.key, requests: v.requests }));
      expect(sessionsAfter).to.have.deep.members(sessionsBefore);
      expect(await sessionView(svc, 'ignored-on-session-port', bearer)).to.equal(null);
    });
  }
});
