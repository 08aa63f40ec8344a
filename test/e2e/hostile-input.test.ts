import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { HTTP_HEAD_TIMEOUT_MS, SOCKS_HANDSHAKE_TIMEOUT_MS } from '../../workers/proxy/proxy-timeouts.js';
import { API_HEADERS_TIMEOUT_MS } from '../../workers/api/api-worker.js';
import { MAX_JSON_BODY_BYTES } from '../../workers/api/api-app.js';
import { MAX_SESSION_KEY_BYTES } from '../../shared/api/session-key.js';
import type { SessionView } from '../../shared/api/views.js';
import { session, sessions } from '../support/clients/api-waits.js';
import { openFileDescriptors, serviceWorkers } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { httpStatusOf, rawExchange, slowClient, type RawExchangeResult, type SlowClientResult } from '../support/network/slowloris.js';
import { openSocksTunnel, httpGetOverTunnel } from '../support/clients/socks5-client.js';
import { httpProxyRequest, socksRequest } from '../support/network/traffic.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

/** Slack on top of a server deadline for a busy 2-core machine. */
const MARGIN_MS = 5_000;
/** Slow connections per listener and kind. */
const SLOW_CLIENTS = 8;
/** fast-check runs per proxy listener, each a batch of connections (scaled by EXITPOOL_FUZZ_SCALE, or set by EXITPOOL_FUZZ_RUNS). */
const FUZZ_RUNS = process.env.EXITPOOL_FUZZ_RUNS === undefined ? fuzzRuns(2) : Number(process.env.EXITPOOL_FUZZ_RUNS);
const FUZZ_BATCH = 40;

/** No colon: a Basic credential cannot carry one in its user part (RFC 7617). */
const INJECTED_LINE = '2026-01-01 error forged line';
/** Session keys that must be handled safely: they work or are refused cleanly, never corrupt logs or views. */
const HOSTILE_KEYS: Record<string, string> = {
  'log injection (LF)': `evil\n${INJECTED_LINE}`,
  'log injection (CRLF)': `evil\r\n${INJECTED_LINE}\r\nX-Injected 1`,
  'control characters': 'ctl\u0001\u0007\t\u001b[31mred\u001b[0m\u007f',
  'NUL byte': 'nul\u0000byte',
  'path characters': '../../etc/passwd?x=1#y%2F',
  '255 ASCII bytes': 'k'.repeat(255),
  '255 UTF-8 bytes': `${'é'.repeat(127)}x`,
};

function trickle(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}

function socksHandshakeBytes(user: string, password: string): Buffer {
  const u = Buffer.from(user);
  const p = Buffer.from(password);
  return Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p, Buffer.from([5, 1, 0, 3, 14]), Buffer.from('whoami.testnet'), Buffer.from([0, 80])]);
}

function expectClosedByDeadline(results: readonly SlowClientResult[], deadlineMs: number, what: string): void {
  for (const r of results) {
    expect(r.closedAfterMs, `${what}: the server never closed the connection`).to.not.equal(null);
    expect(r.closedAfterMs as number, `${what}: closed after`).to.be.within(deadlineMs - 1000, deadlineMs + MARGIN_MS);
  }
}

/**
 * Hostile clients against the real service on the private network: slowloris on both proxy
 * listeners and the API, oversized heads and bodies, random bytes, and session keys with
 * control characters, 255 bytes or log-injection text. One service for the file.
 */
describe('hostile input (real service, private network)', function () {
  this.timeout(240_000);
  let svc: RunningService;
  let admin: string;
  let proxy: { socksPort: number; httpPort: number; token: string };

  before(async function () {
    this.timeout(300_000);
    // debug: the most log lines, so a forged line would have the most chances to appear.
    svc = await startService({ POOL_SIZE: '2', PROXY_WORKERS: '2', LOG_LEVEL: 'debug' });
    await svc.waitReady(2, 180_000);
    admin = await svc.login();
    proxy = { socksPort: svc.socksPort, httpPort: svc.httpPort, token: TEST_PROXY_TOKEN };
  });

  after(async function () {
    this.timeout(60_000);
    if (svc) expect(await svc.stop()).to.equal(0);
  });

  it('closes slowloris connections on both proxy listeners and the API at their deadlines, serving normal requests meanwhile', async function () {
    this.timeout(120_000);
    const workers = serviceWorkers(svc.pid);
    const fdsOf = (): number => workers.proxy.reduce((n, pid) => n + (openFileDescriptors(pid) ?? 0), 0);
    const fdsBefore = fdsOf();
    const giveUp = 3 * Math.max(SOCKS_HANDSHAKE_TIMEOUT_MS, HTTP_HEAD_TIMEOUT_MS, API_HEADERS_TIMEOUT_MS);
    const group = (port: number, bytes: Buffer): Promise<SlowClientResult[]> =>
      Promise.all(Array.from({ length: SLOW_CLIENTS }, () => slowClient(port, bytes, 1000, giveUp)));
    const httpHead = trickle(`GET http://whoami.testnet:${svc.net.whoami.port}/ HTTP/1.1\r\nHost: whoami.testnet\r\nX-Slow: ${'a'.repeat(60)}`);
    const apiHead = trickle(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'a'.repeat(60)}`);
    const silent = Buffer.alloc(0);
    const slow = {
      socksTrickle: group(svc.socksPort, socksHandshakeBytes('slow', TEST_PROXY_TOKEN)),
      socksSilent: group(svc.socksPort, silent),
      httpTrickle: group(svc.httpPort, httpHead),
      httpSilent: group(svc.httpPort, silent),
      apiTrickle: group(svc.apiPort, apiHead),
      apiSilent: group(svc.apiPort, silent),
    };

    // Meanwhile, ordinary clients are served at once.
    await new Promise((r) => setTimeout(r, 2000));
    const s = await socksRequest(proxy, 'hostile-normal', svc.whoamiUrl, 20_000);
    expect(s.ok, s.error).to.equal(true);
    const h = await httpProxyRequest(proxy, 'hostile-normal', svc.whoamiUrl, 20_000);
    expect(h.ok, h.error).to.equal(true);
    const pool = await svc.api('/api/pool', { bearer: admin });
    expect(pool.status).to.equal(200);

    expectClosedByDeadline(await slow.socksTrickle, SOCKS_HANDSHAKE_TIMEOUT_MS, 'SOCKS5, trickled handshake');
    expectClosedByDeadline(await slow.socksSilent, SOCKS_HANDSHAKE_TIMEOUT_MS, 'SOCKS5, silent');
    const httpTrickled = await slow.httpTrickle;
    expectClosedByDeadline(httpTrickled, HTTP_HEAD_TIMEOUT_MS, 'HTTP proxy, trickled head');
    for (const r of httpTrickled) expect(httpStatusOf(r.received), 'HTTP proxy answer to a slow head').to.equal(408);
    expectClosedByDeadline(await slow.httpSilent, HTTP_HEAD_TIMEOUT_MS, 'HTTP proxy, silent');
    const apiTrickled = await slow.apiTrickle;
    expectClosedByDeadline(apiTrickled, API_HEADERS_TIMEOUT_MS, 'API, trickled head');
    for (const r of apiTrickled) expect([408, null], 'API answer to a slow head').to.include(httpStatusOf(r.received));
    expectClosedByDeadline(await slow.apiSilent, API_HEADERS_TIMEOUT_MS, 'API, silent');

    // The deadlines freed what the slow clients held in the proxy workers.
    await pollUntil('proxy worker descriptors back to their level', () => (fdsOf() <= fdsBefore + 4 ? true : undefined), 15_000);
    expect(serviceWorkers(svc.pid)).to.deep.equal(workers);
  });

  it('refuses oversized heads (431) and bodies (400) cleanly', async () => {
    const big = 'a'.repeat(20 * 1024);
    const auth = `Proxy-Authorization: Basic ${Buffer.from(`big:${TEST_PROXY_TOKEN}`).toString('base64')}\r\n`;
    const proxyHead = await rawExchange(
      svc.httpPort,
      trickle(`GET http://whoami.testnet:${svc.net.whoami.port}/ HTTP/1.1\r\nHost: whoami.testnet\r\n${auth}X-Big: ${big}\r\n\r\n`),
      20_000,
    );
    expect(httpStatusOf(proxyHead.received), proxyHead.received.subarray(0, 200).toString()).to.equal(431);
    expect(proxyHead.closedByServer, 'HTTP proxy closes after 431').to.equal(true);
    const manyFields = Array.from({ length: 400 }, (_, i) => `X-F${i}: ${'b'.repeat(50)}\r\n`).join('');
    const proxyFields = await rawExchange(
      svc.httpPort,
      trickle(`GET http://whoami.testnet:${svc.net.whoami.port}/ HTTP/1.1\r\nHost: whoami.testnet\r\n${auth}${manyFields}\r\n`),
      20_000,
    );
    expect(httpStatusOf(proxyFields.received)).to.equal(431);

    const apiHead = await rawExchange(svc.apiPort, trickle(`GET /api/pool HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${admin}\r\nX-Big: ${big}\r\n\r\n`), 20_000);
    expect([400, 431]).to.include(httpStatusOf(apiHead.received));
    expect(apiHead.closedByServer, 'API closes after an oversized head').to.equal(true);

    const bigJson = JSON.stringify({ name: 'x'.repeat(MAX_JSON_BODY_BYTES + 10), scope: 'proxy' });
    const token = await svc.api('/api/tokens', { method: 'POST', bearer: admin, body: bigJson });
    expect(token.status).to.equal(400);
    expect(await token.text()).to.match(/larger than/);
    const failure = await svc.api('/api/sessions/hostile-normal/failure', { method: 'POST', bearer: admin, body: JSON.stringify({ kind: 'other', reason: 'r'.repeat(100_000) }) });
    expect(failure.status).to.equal(400);
    // A chunked body with no length announced is cut off at the limit too, not read to the end.
    const chunk = 'c'.repeat(8192);
    const chunked = await rawExchange(
      svc.apiPort,
      trickle(
        `POST /api/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
          `${Array.from({ length: 64 }, () => `2000\r\n${chunk}\r\n`).join('')}0\r\n\r\n`,
      ),
      20_000,
    );
    expect(httpStatusOf(chunked.received)).to.equal(400);
    expect((await svc.api('/api/tokens', { bearer: admin })).status).to.equal(200);
  });

  it('survives random bytes on both proxy listeners (fast-check): every connection ends, no worker dies', async function () {
    // A run is bound by the handshake deadlines (a batch waits for its slowest connection).
    this.timeout(60_000 + FUZZ_RUNS * 2 * SOCKS_HANDSHAKE_TIMEOUT_MS);
    const workers = serviceWorkers(svc.pid);
    const valid = socksHandshakeBytes('fuzz', TEST_PROXY_TOKEN);
    const socksInput = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 600 }),
      // A valid handshake with bytes flipped or cut: the interesting inputs are near-valid ones.
      fc.tuple(fc.nat({ max: valid.length - 1 }), fc.integer({ min: 0, max: 255 }), fc.nat({ max: valid.length })).map(([at, byte, cut]) => {
        const b = Buffer.from(valid);
        b[at] = byte;
        return new Uint8Array(b.subarray(0, Math.max(1, cut)));
      }),
    );
    const httpInput = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 600 }),
      fc.string({ maxLength: 300 }).map((junk) => new TextEncoder().encode(`GET http://whoami.testnet/ HTTP/1.1\r\nHost: ${junk}\r\n${junk}\r\n\r\n`)),
      fc.string({ maxLength: 200 }).map((junk) => new TextEncoder().encode(`${junk} ${junk} HTTP/1.1\r\nProxy-Authorization: ${junk}\r\n\r\n`)),
    );
    const deadline = Math.max(SOCKS_HANDSHAKE_TIMEOUT_MS, HTTP_HEAD_TIMEOUT_MS) + MARGIN_MS;
    // One run sends a whole batch at once, so the connections that wait for more bytes share one
    // deadline; some half-close after sending, the others leave the server waiting.
    const batch = <T>(input: fc.Arbitrary<T>): fc.Arbitrary<[T, boolean][]> =>
      fc.array(fc.tuple(input, fc.boolean()), { minLength: FUZZ_BATCH, maxLength: FUZZ_BATCH });
    // SOCKS5: every connection is closed by its handshake deadline at the latest. HTTP: closed,
    // or answered with a complete response (a keep-alive connection then waits for the next one).
    const survives = (port: number, answered: (r: RawExchangeResult) => boolean) => async (cases: [Uint8Array, boolean][]): Promise<void> => {
      const results = await Promise.all(cases.map(([bytes, end]) => rawExchange(port, Buffer.from(bytes), deadline, end)));
      results.forEach((r, i) => {
        const input = Buffer.from((cases[i] as [Uint8Array, boolean])[0]).toString('latin1');
        expect(r.closedByServer || answered(r), `connection on ${port} neither answered nor closed: ${JSON.stringify(input)}`).to.equal(true);
      });
    };
    const options = { numRuns: FUZZ_RUNS, endOnFailure: true };
    await Promise.all([
      fc.assert(fc.asyncProperty(batch(socksInput), survives(svc.socksPort, () => false)), options),
      fc.assert(fc.asyncProperty(batch(httpInput), survives(svc.httpPort, (r) => httpStatusOf(r.received) !== null && r.received.includes('\r\n\r\n'))), options),
    ]);
    expect(serviceWorkers(svc.pid), 'worker processes').to.deep.equal(workers);
    const ok = await socksRequest(proxy, 'after-fuzz', svc.whoamiUrl, 20_000);
    expect(ok.ok, ok.error).to.equal(true);
  });

  for (const [name, key] of Object.entries(HOSTILE_KEYS)) {
    it(`handles a session key with ${name} safely on both listeners and the API`, async () => {
      const tunnel = await openSocksTunnel({
        port: svc.socksPort,
        username: key,
        password: TEST_PROXY_TOKEN,
        host: 'whoami.testnet',
        targetPort: svc.net.whoami.port,
        timeoutMs: 20_000,
      });
      expect(tunnel.kind, JSON.stringify(tunnel.kind === 'open' ? 'open' : tunnel)).to.equal('open');
      if (tunnel.kind !== 'open') return;
      const viaSocks = await httpGetOverTunnel(tunnel.socket, 'whoami.testnet', '/', 20_000);
      expect(viaSocks.status).to.equal(200);
      const viaHttp = await httpProxyRequest(proxy, key, svc.whoamiUrl, 20_000);
      expect(viaHttp.ok, viaHttp.error).to.equal(true);
      expect(viaHttp.body.trim(), 'same session, same exit on both listeners').to.equal(viaSocks.body.trim());

      // Counters arrive with the proxy workers' next accounting batch.
      const view = await pollUntil('both requests counted', async () => {
        const v = await session(svc, admin, key);
        return v.requests >= 2 ? v : undefined;
      }, 10_000);
      expect(view.key, 'GET /api/sessions/{key} round-trips the exact key').to.equal(key);
      expect((await sessions(svc, admin)).filter((s: SessionView) => s.key === key)).to.have.length(1);
      const report = await svc.api(`/api/sessions/${encodeURIComponent(key)}/failure`, { method: 'POST', bearer: admin, body: { kind: 'other', reason: key } });
      expect(report.status).to.equal(200);
      const events = (await (await svc.api('/api/events?limit=20', { bearer: admin })).json()) as { session: string | null; details: { reason?: string } }[];
      const reported = events.find((e) => e.session === key && e.details.reason !== undefined);
      expect(reported, 'audit event carries the exact key').to.not.equal(undefined);
      // The free-text reason is stored without control characters (it reaches logs and dashboards).
      expect(reported?.details.reason).to.not.match(/[\u0000-\u001f\u007f]/);
    });
  }

  it('refuses keys longer than a SOCKS5 username on the HTTP proxy (400), as the API does', async () => {
    const key = 'L'.repeat(MAX_SESSION_KEY_BYTES + 1);
    const viaHttp = await httpProxyRequest(proxy, key, svc.whoamiUrl, 20_000);
    expect(viaHttp.ok).to.equal(false);
    expect(viaHttp.error).to.match(/^status 400 session key longer than/);
    expect((await sessions(svc, admin)).some((s) => s.key === key), 'no unreachable session').to.equal(false);
    expect((await svc.api(`/api/sessions/${key}`, { bearer: admin })).status).to.equal(400);
    // The longest key that fits works on the HTTP proxy too.
    const longest = await httpProxyRequest(proxy, key.slice(1), svc.whoamiUrl, 20_000);
    expect(longest.ok, longest.error).to.equal(true);
  });

  it('never lets injected text forge a log line', async () => {
    // More places user text reaches: a sign-in name, a token name and a failure reason.
    await svc.api('/api/auth/login', { method: 'POST', body: { user: `evil\n${INJECTED_LINE}`, password: `x\n${INJECTED_LINE}` } });
    await svc.api('/api/tokens', { method: 'POST', bearer: admin, body: { name: `evil\n${INJECTED_LINE}`, scope: 'proxy' } });
    await svc.api(`/api/sessions/${encodeURIComponent(`evil\n${INJECTED_LINE}`)}/failure`, {
      method: 'POST',
      bearer: admin,
      body: { kind: `x\n${INJECTED_LINE}`, reason: `y\r\n${INJECTED_LINE}` },
    });
    await new Promise((r) => setTimeout(r, 500));
    const lines = svc.output().split(/\r\n|\r|\n/);
    expect(lines.length).to.be.greaterThan(10);
    expect(lines.filter((l) => l.startsWith(INJECTED_LINE) || l.startsWith('X-Injected'))).to.deep.equal([]);
    expect(svc.output()).to.not.include(`evil\n${INJECTED_LINE}`);
  });
});
