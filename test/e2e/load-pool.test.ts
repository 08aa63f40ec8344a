import { expect } from 'chai';
import type net from 'node:net';
import { instances, sessions, settledTotals } from '../support/clients/api-waits.js';
import { EchoProcess } from '../support/network/echo-server.js';
import { FixedRate, mapWithConcurrency, openConnectTunnel, type RateOutcome } from '../support/network/load.js';
import { ensureFileDescriptorLimit, fileDescriptorLimit, openFileDescriptors, rssBytes, serviceWorkers } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { echoRoundTrip, openSocksTunnel } from '../support/clients/socks5-client.js';
import { httpProxyRequest } from '../support/network/traffic.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

/**
 * The load test's size. `npm test` runs the reduced form; `npm run test:soak` sets
 * EXITPOOL_SOAK=1 for the full one (10,000 connections held for five minutes). Each figure can
 * also be set on its own (EXITPOOL_LOAD_CONNECTIONS, _HOLD_MS, _RATE).
 */
const SOAK = process.env.EXITPOOL_SOAK === '1';
const envNumber = (name: string, fallback: number): number => (process.env[name] === undefined ? fallback : Number(process.env[name]));
const CONNECTIONS = envNumber('EXITPOOL_LOAD_CONNECTIONS', SOAK ? 10_000 : 1_000);
const HOLD_MS = envNumber('EXITPOOL_LOAD_HOLD_MS', SOAK ? 300_000 : 15_000);
/** Short requests per second started during the hold (half SOCKS5 echo, half HTTP proxy GET). */
const RATE = envNumber('EXITPOOL_LOAD_RATE', SOAK ? 20 : 10);
const POOL_SIZE = SOAK ? 4 : 3;
/**
 * Each proxy worker holds two descriptors per connection it carries, and the kernel does not
 * spread accepted connections evenly over the workers sharing the listener: four workers keep
 * each one far below a 20,000 limit at 10,000 connections.
 */
const PROXY_WORKERS = SOAK ? 4 : 2;
/** The session cap: the held connections use exactly this many keys. */
const MAX_SESSIONS = 5;
/** Tunnels being opened at once during the ramp. */
const RAMP_CONCURRENCY = 200;
/** Every held connection echoes once per this, so none reaches the relay idle timeout (300 s). */
const HELD_PING_INTERVAL_MS = 60_000;
/** Memory is flat when a later sample exceeds the first of the hold by no more than this. */
const RSS_TOLERANCE = (start: number): number => start * 0.25 + 24 * 1024 * 1024;

interface Held {
  socket: net.Socket;
  key: string;
}

const PING = Buffer.from('ping-through-the-pool\n');
const loadKey = (i: number): string => `load-${i % MAX_SESSIONS}`;

/**
 * Load through the real service on the private network: N proxied connections held open at
 * once (SOCKS5 and HTTP CONNECT, to an echo server reached through the exits) with a sustained
 * request rate on top, and the session cap under load. Nothing may be lost: every connection
 * and request answered, the pool's totals equal to what was made, active counts back to 0,
 * proxy worker memory flat.
 */
describe(`load: ${CONNECTIONS} held connections + ${RATE} req/s for ${HOLD_MS / 1000} s (real service, private network)`, function () {
  this.timeout(HOLD_MS + 600_000);
  let echo: EchoProcess;
  let svc: RunningService;
  let admin: string;
  const proxy = { socksPort: 0, httpPort: 0, token: TEST_PROXY_TOKEN };

  before(async function () {
    this.timeout(300_000);
    // Descriptors: this process holds one per connection, and so does the echo server (which
    // inherits the limit). Where the hard limit is lower, prlimit raises it (needs CAP_SYS_RESOURCE).
    const limit = ensureFileDescriptorLimit(CONNECTIONS + 2048);
    echo = await EchoProcess.start();
    svc = await startService({ POOL_SIZE: String(POOL_SIZE), PROXY_WORKERS: String(PROXY_WORKERS), MAX_SESSIONS: String(MAX_SESSIONS) });
    await svc.waitReady(POOL_SIZE, 180_000);
    admin = await svc.login();
    proxy.socksPort = svc.socksPort;
    proxy.httpPort = svc.httpPort;
    expect(fileDescriptorLimit(svc.pid).soft, 'service descriptor limit').to.be.at.least(limit.soft);
    for (const pid of serviceWorkers(svc.pid).proxy) expect(fileDescriptorLimit(pid).soft).to.be.at.least((4 * CONNECTIONS) / PROXY_WORKERS);
  });

  after(async function () {
    this.timeout(60_000);
    try {
      if (svc) expect(await svc.stop()).to.equal(0);
    } finally {
      await echo?.stop();
    }
  });

  const openHeld = async (i: number): Promise<Held> => {
    const key = loadKey(i);
    let socket: net.Socket;
    // One in four through the HTTP proxy's CONNECT, the rest through SOCKS5.
    if (i % 4 === 3) {
      const t = await openConnectTunnel({ port: proxy.httpPort, username: key, password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 90_000 });
      if (!t.ok) throw new Error(`connection ${i} (CONNECT): ${t.error}`);
      socket = t.socket;
    } else {
      const t = await openSocksTunnel({ port: proxy.socksPort, username: key, password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 90_000 });
      if (t.kind !== 'open') throw new Error(`connection ${i} (SOCKS5): ${JSON.stringify({ ...t })}`);
      socket = t.socket;
    }
    await echoRoundTrip(socket, PING, 60_000);
    return { socket, key };
  };

  const shortRequest = async (n: number): Promise<RateOutcome> => {
    const key = loadKey(n);
    if (n % 2 === 1) {
      const r = await httpProxyRequest(proxy, key, svc.whoamiUrl, 60_000);
      return { ok: r.ok, kind: 'http-get', error: r.error };
    }
    const t = await openSocksTunnel({ port: proxy.socksPort, username: key, password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 60_000 });
    if (t.kind !== 'open') return { ok: false, kind: 'socks-echo', error: `socks ${t.kind} at ${t.step}` };
    try {
      await echoRoundTrip(t.socket, PING, 60_000);
      return { ok: true, kind: 'socks-echo', error: '' };
    } catch (e) {
      return { ok: false, kind: 'socks-echo', error: (e as Error).message };
    } finally {
      t.socket.destroy();
    }
  };

  it('holds every connection and answers every request; totals add up exactly, active returns to 0, memory stays flat', async () => {
    const workers = serviceWorkers(svc.pid);
    const workerFds = (): number => workers.proxy.reduce((n, pid) => n + (openFileDescriptors(pid) ?? 0), 0);
    const rss = (): number => workers.proxy.reduce((n, pid) => n + (rssBytes(pid) ?? 0), 0);
    const fdsBefore = workerFds();
    const totalsBefore = await settledTotals(svc, admin);
    const echoBefore = await echo.stats();

    const rampStarted = Date.now();
    const held = await mapWithConcurrency(Array.from({ length: CONNECTIONS }, (_, i) => i), RAMP_CONCURRENCY, (i) => openHeld(i));
    const rampMs = Date.now() - rampStarted;
    expect((await echo.stats()).open - echoBefore.open, 'connections open at the echo server').to.equal(CONNECTIONS);
    const holdStarted = Date.now();
    const rssSamples = [rss()];
    const fdsAtPeak = workerFds();

    // The sustained rate, and a sweep that keeps every held connection busy now and then.
    const rate = new FixedRate(RATE, shortRequest);
    const pingFailures: string[] = [];
    let pinged = 0;
    const sweeping = (async () => {
      while (Date.now() - holdStarted < HOLD_MS - HELD_PING_INTERVAL_MS) {
        const sweepStarted = Date.now();
        await mapWithConcurrency(held, 50, async (h) => {
          try {
            await echoRoundTrip(h.socket, PING, 60_000);
            pinged += 1;
          } catch (e) {
            pingFailures.push((e as Error).message);
          }
        });
        const rest = HELD_PING_INTERVAL_MS - (Date.now() - sweepStarted);
        if (rest > 0) await new Promise((r) => setTimeout(r, Math.min(rest, HOLD_MS - (Date.now() - holdStarted))));
      }
    })();
    await new Promise((r) => setTimeout(r, HOLD_MS / 2));
    rssSamples.push(rss());

    // Bounded under load: the five keys hold live connections, so a sixth key is refused at once.
    const refusedSocks = await openSocksTunnel({ port: proxy.socksPort, username: 'load-extra', password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 30_000 });
    expect(refusedSocks.kind === 'refused' && refusedSocks.step === 'request' ? refusedSocks.code : refusedSocks.kind, 'SOCKS5 reply for a sixth key').to.equal(1);
    const refusedHttp = await httpProxyRequest(proxy, 'load-extra', svc.whoamiUrl, 30_000);
    expect(refusedHttp.error, 'HTTP answer for a sixth key').to.match(/^status 503 session limit reached/);

    await new Promise((r) => setTimeout(r, Math.max(0, HOLD_MS - (Date.now() - holdStarted))));
    await sweeping;
    const outcomes = await rate.stop();
    rssSamples.push(rss());

    // Every held connection still relays at the end.
    const finalPing = await mapWithConcurrency(held, RAMP_CONCURRENCY, (h) => echoRoundTrip(h.socket, PING, 60_000).then(() => '', (e: Error) => e.message));
    expect(finalPing.filter((e) => e !== ''), 'held connections that stopped relaying').to.deep.equal([]);
    expect(pingFailures).to.deep.equal([]);
    const failed = outcomes.filter((o) => !o.ok);
    expect(failed.map((o) => `${o.kind}: ${o.error}`), 'short requests that failed').to.deep.equal([]);
    expect(outcomes.length, 'short requests answered').to.equal(rate.started);

    for (const h of held) h.socket.end();
    await pollUntil('echo server connections closed', async () => ((await echo.stats()).open === echoBefore.open ? true : undefined), 60_000, 500);
    await pollUntil('every session idle', async () => ((await sessions(svc, admin)).every((s) => s.active === 0) ? true : undefined), 30_000, 500);
    const totalsAfter = await settledTotals(svc, admin);
    const echoAfter = await echo.stats();

    const socksEcho = outcomes.filter((o) => o.kind === 'socks-echo').length;
    expect(totalsAfter.requests - totalsBefore.requests, 'pool totals.requests').to.equal(CONNECTIONS + outcomes.length);
    expect(totalsAfter.failures - totalsBefore.failures, 'pool totals.failures').to.equal(0);
    expect(echoAfter.accepted - echoBefore.accepted, 'connections the destination saw').to.equal(CONNECTIONS + socksEcho);
    const perInstance = (await instances(svc, admin)).reduce((n, i) => n + i.totals.failures, 0);
    expect(perInstance, 'failures on instances').to.equal(0);

    const [rssStart, rssMiddle, rssEnd] = rssSamples as [number, number, number];
    expect(rssMiddle, 'proxy worker RSS at the middle of the hold').to.be.at.most(rssStart + RSS_TOLERANCE(rssStart));
    expect(rssEnd, 'proxy worker RSS at the end of the hold').to.be.at.most(rssStart + RSS_TOLERANCE(rssStart));
    await pollUntil('proxy worker descriptors released', () => (workerFds() <= fdsBefore + 8 ? true : undefined), 30_000, 500);

    const figures = {
      connections: CONNECTIONS,
      rampMs,
      holdMs: Date.now() - holdStarted,
      rate: RATE,
      shortRequests: outcomes.length,
      heldPings: pinged + held.length,
      totalsRequests: totalsAfter.requests - totalsBefore.requests,
      proxyWorkerRssMiB: rssSamples.map((b) => Math.round(b / 1048576)),
      proxyWorkerFds: { before: fdsBefore, peak: fdsAtPeak },
    };
    if (SOAK) console.log(`soak figures: ${JSON.stringify(figures)}`);
  });

  it('refuses a sixth key cleanly while five sessions hold live connections (MAX_SESSIONS=5), and recovers when they close', async () => {
    const keys = Array.from({ length: MAX_SESSIONS }, (_, i) => `bound-${i}`);
    const held: net.Socket[] = [];
    try {
      for (const key of keys) {
        const t = await openSocksTunnel({ port: proxy.socksPort, username: key, password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 60_000 });
        expect(t.kind, key).to.equal('open');
        if (t.kind === 'open') held.push(t.socket);
      }
      const started = performance.now();
      const socks = await openSocksTunnel({ port: proxy.socksPort, username: 'bound-extra', password: proxy.token, host: echo.host, targetPort: echo.port, timeoutMs: 30_000 });
      expect(socks.kind === 'refused' && socks.step === 'request' ? socks.code : socks.kind, 'SOCKS5 general failure').to.equal(1);
      const http = await httpProxyRequest(proxy, 'bound-extra', svc.whoamiUrl, 30_000);
      expect(http.error).to.match(/^status 503 session limit reached/);
      expect(performance.now() - started, 'refusals are immediate').to.be.below(5_000);
      // A key that already has a session is not limited.
      const existing = await httpProxyRequest(proxy, keys[0] as string, svc.whoamiUrl, 30_000);
      expect(existing.ok, existing.error).to.equal(true);

      // One session goes idle: the sixth key takes its slot.
      (held.shift() as net.Socket).end();
      await pollUntil(
        'bound-0 idle',
        async () => ((await sessions(svc, admin)).find((s) => s.key === 'bound-0')?.active === 0 ? true : undefined),
        15_000,
      );
      const admitted = await httpProxyRequest(proxy, 'bound-extra', svc.whoamiUrl, 30_000);
      expect(admitted.ok, admitted.error).to.equal(true);
    } finally {
      for (const s of held) s.end();
    }
    // No lasting lock-up: once everything is closed, any new keys work.
    await pollUntil('every session idle', async () => ((await sessions(svc, admin)).every((s) => s.active === 0) ? true : undefined), 15_000);
    for (const key of ['after-0', 'after-1', 'after-2']) {
      const r = await httpProxyRequest(proxy, key, svc.whoamiUrl, 30_000);
      expect(r.ok, `${key}: ${r.error}`).to.equal(true);
    }
    expect((await sessions(svc, admin)).length).to.be.at.most(MAX_SESSIONS);
  });
});
