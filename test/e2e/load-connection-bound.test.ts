import { expect } from 'chai';
import type net from 'node:net';
import { pollUntil } from '../support/waiting.js';
import { openSocksTunnel } from '../support/clients/socks5-client.js';
import { httpProxyRequest, socksRequest } from '../support/network/traffic.js';
import { parsePrometheusText, samplesOf } from '../support/parsers/prometheus-text.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

/** Small on purpose: the bound is reached with a handful of real tunnels through tor. */
const BOUND = 24;
const OVER = 6;

/**
 * MAX_CONNECTIONS_PER_WORKER through the real service on the private network: a worker full of
 * tunnels refuses further clients at once and clearly (HTTP 503 naming the setting, SOCKS5
 * closed), logs it once rather than per connection, counts it in /metrics, and serves again as
 * soon as connections end: never a lasting lock-up.
 */
describe('load: the connection bound of a proxy worker (real service, private network)', function () {
  this.timeout(180_000);
  let svc: RunningService;
  const proxy = { socksPort: 0, httpPort: 0, token: TEST_PROXY_TOKEN };
  const held: net.Socket[] = [];

  before(async function () {
    this.timeout(240_000);
    svc = await startService({ POOL_SIZE: '2', PROXY_WORKERS: '1', MAX_CONNECTIONS_PER_WORKER: String(BOUND) });
    await svc.waitReady(2, 180_000);
    proxy.socksPort = svc.socksPort;
    proxy.httpPort = svc.httpPort;
  });

  after(async function () {
    this.timeout(60_000);
    for (const s of held) s.destroy();
    if (svc) expect(await svc.stop()).to.equal(0);
  });

  const metrics = async (): Promise<ReturnType<typeof parsePrometheusText>> => parsePrometheusText(await (await svc.api('/metrics')).text());
  const value = (f: ReturnType<typeof parsePrometheusText>, name: string): number => samplesOf(f, name).reduce((sum, s) => sum + s.value, 0);

  it('refuses clients over the bound clearly, counts and logs it, and serves again once connections end', async () => {
    // Fill the one worker with real tunnels through tor.
    for (let i = 0; i < BOUND; i++) {
      const t = await openSocksTunnel({ port: svc.socksPort, username: `bound-${i % 4}`, password: TEST_PROXY_TOKEN, host: 'whoami.testnet', targetPort: svc.net.whoami.port, timeoutMs: 30_000 });
      expect(t.kind, `tunnel ${i}`).to.equal('open');
      if (t.kind === 'open') held.push(t.socket);
    }
    await pollUntil('the worker reports the bound reached', async () => ((value(await metrics(), 'pool_proxy_worker_connections') === BOUND) ? true : undefined), 10_000, 100);

    const refused = await Promise.all(
      Array.from({ length: OVER }, (_, i) =>
        i % 2 === 0 ? httpProxyRequest(proxy, 'over', svc.whoamiUrl, 10_000) : socksRequest(proxy, 'over', svc.whoamiUrl, 10_000),
      ),
    );
    for (const r of refused) {
      expect(r.ok, `${r.listener} over the bound`).to.equal(false);
      // Refused, not queued: a queued request would have waited for a slot and timed out.
      expect(r.error, `${r.listener} refused, not queued`).to.not.match(/timeout|no answer within/i);
      if (r.listener === 'http') expect(r.error).to.match(/^status 503 .*MAX_CONNECTIONS_PER_WORKER/);
    }
    const counted = await pollUntil('refusals counted', async () => {
      const n = value(await metrics(), 'pool_proxy_connections_refused_total');
      return n >= OVER ? n : undefined;
    }, 10_000, 100);
    expect(counted).to.equal(OVER);
    const warnings = svc.output().split('\n').filter((l) => l.includes('connection refused: this proxy worker holds its maximum'));
    expect(warnings.length, 'logged once per interval, not per connection').to.equal(1);

    // Connections end: the worker serves again, on both listeners.
    for (const s of held.splice(0, 4)) s.destroy();
    await pollUntil('room again', async () => ((value(await metrics(), 'pool_proxy_worker_connections') <= BOUND - 4) ? true : undefined), 10_000, 100);
    const served = [await socksRequest(proxy, 'after', svc.whoamiUrl, 30_000), await httpProxyRequest(proxy, 'after', svc.whoamiUrl, 30_000)];
    for (const r of served) expect(r.ok, `${r.listener} after connections ended: ${r.error}`).to.equal(true);
    for (const s of held.splice(0)) s.destroy();
    await pollUntil('every connection given back', async () => ((value(await metrics(), 'pool_proxy_worker_connections') === 0) ? true : undefined), 10_000, 100);
  });
});
