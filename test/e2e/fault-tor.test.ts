import { expect } from 'chai';
import { UPSTREAM_DIAL_TIMEOUT_MS } from '../../workers/proxy/proxy-timeouts.js';
import { curl, type CurlResult } from '../support/clients/curl.js';
import { apiJson, instance, poolSummary, session, sessions } from '../support/clients/api-waits.js';
import { DripServer } from '../support/network/drip-server.js';
import { isAlive, processState, signal } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { TrafficLoops, httpProxyRequest, socksRequest, type RequestRecord } from '../support/network/traffic.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

/** A request the proxy itself must answer (its dial deadline) comes back within this. */
const PROXY_ANSWER_DEADLINE_MS = UPSTREAM_DIAL_TIMEOUT_MS + 15_000;
/** The client-side deadline of those requests: longer, so a proxy answer is told apart from a hang. */
const CLIENT_DEADLINE_MS = UPSTREAM_DIAL_TIMEOUT_MS + 40_000;

interface TimedCurl extends CurlResult {
  endedAt: number;
}

const timed = (p: Promise<CurlResult>): Promise<TimedCurl> => p.then((r) => ({ ...r, endedAt: Date.now() }));

function failuresOf(records: readonly RequestRecord[]): string {
  return records
    .filter((r) => !r.ok)
    .map((r) => `${r.listener} ${r.key}: ${r.error}`)
    .join('\n');
}

/** A refusal the proxy sent (SOCKS reply code, HTTP 5xx), as opposed to a client-side deadline. */
function answeredByProxy(r: RequestRecord): boolean {
  return /^socks refused at request \d+$/.test(r.error) || /^status 5\d\d/.test(r.error);
}

/**
 * Faults of the tor instances and of the network under them, on the private network with the
 * real CLI: a tor killed with SIGKILL under load, a tor frozen with SIGSTOP, and every exit of
 * the network frozen and thawed. One service (3 instances) for the file.
 */
describe('faults: tor instances and exits (real service, private network)', function () {
  this.timeout(240_000);
  let drip: DripServer;
  let svc: RunningService;
  let admin: string;
  /** Processes this file stopped with SIGSTOP; continued in after() whatever happens. */
  const frozen = new Set<number>();
  const proxy = { socksPort: 0, httpPort: 0, token: TEST_PROXY_TOKEN };
  const keys = Array.from({ length: 9 }, (_, i) => `ft-${i}`);

  const keysByInstance = async (): Promise<Map<number, string[]>> => {
    const out = new Map<number, string[]>();
    for (const s of await sessions(svc, admin)) {
      if (!keys.includes(s.key)) continue;
      out.set(s.instance, [...(out.get(s.instance) ?? []), s.key]);
    }
    return out;
  };

  const thaw = (pid: number): void => {
    signal(pid, 'SIGCONT');
    frozen.delete(pid);
  };

  before(async function () {
    this.timeout(300_000);
    drip = await DripServer.start();
    svc = await startService({ POOL_SIZE: '3', PROXY_WORKERS: '2' });
    await svc.waitReady(3, 180_000);
    admin = await svc.login();
    proxy.socksPort = svc.socksPort;
    proxy.httpPort = svc.httpPort;
    for (const key of keys) {
      const r = await socksRequest(proxy, key, svc.whoamiUrl, 30_000);
      expect(r.ok, `warm-up ${key}: ${r.error}`).to.equal(true);
    }
  });

  after(async function () {
    this.timeout(60_000);
    for (const pid of [...frozen]) thaw(pid);
    try {
      if (svc) expect(await svc.stop()).to.equal(0);
    } finally {
      await drip?.close();
    }
  });

  it('survives a tor killed with SIGKILL under load: in-flight requests fail at once, its sessions move, the instance comes back', async () => {
    const placed = await keysByInstance();
    const [victimId, pinned] = [...placed.entries()].sort((a, b) => b[1].length - a[1].length)[0] as [number, string[]];
    const others = keys.filter((k) => !pinned.includes(k));
    expect(others.length, 'sessions on other instances').to.be.at.least(1);
    const oldPid = (await instance(svc, admin, victimId)).pid;
    expect(isAlive(oldPid), `tor ${oldPid}`).to.equal(true);

    // Requests certainly in flight on the victim: slow downloads through both listeners.
    const dripsBefore = drip.dripsStarted;
    const inFlight = [
      timed(curl(['--socks5-hostname', `${pinned[0]}:${TEST_PROXY_TOKEN}@127.0.0.1:${svc.socksPort}`, drip.url('/drip')], CLIENT_DEADLINE_MS)),
      timed(curl(['-x', `http://${pinned[0]}:${TEST_PROXY_TOKEN}@127.0.0.1:${svc.httpPort}`, drip.url('/drip')], CLIENT_DEADLINE_MS)),
    ];
    await pollUntil('slow downloads streaming', () => (drip.dripsStarted >= dripsBefore + inFlight.length ? true : undefined), 60_000);
    const loops = new TrafficLoops(proxy, others, svc.whoamiUrl, 30_000);
    loops.start();
    await pollUntil('traffic flowing', () => (loops.records.filter((r) => r.ok).length >= others.length ? true : undefined), 60_000);

    const killedAt = Date.now();
    expect(signal(oldPid, 'SIGKILL')).to.equal(true);

    for (const r of await Promise.all(inFlight)) {
      expect(r.code, `curl through the killed tor: ${r.stderr}`).to.not.equal(0);
      expect(r.endedAt - killedAt, 'in-flight request ended after the kill within').to.be.below(15_000);
    }
    await pollUntil(
      'the pool noticed the dead tor',
      async () => {
        const v = await instance(svc, admin, victimId);
        return v.pid !== oldPid || !v.ready ? true : undefined;
      },
      15_000,
    );
    // The next request of every session pinned there succeeds, through another instance.
    for (const key of pinned) {
      const r = await socksRequest(proxy, key, svc.whoamiUrl, 30_000);
      expect(r.ok, `${key} after the kill: ${r.error}`).to.equal(true);
      expect((await session(svc, admin, key)).instance, `${key} moved`).to.not.equal(victimId);
    }
    const records = await loops.stop();
    expect(records.filter((r) => !r.ok), failuresOf(records)).to.deep.equal([]);

    const back = await pollUntil(
      'the instance ready again with a new tor',
      async () => {
        const v = await instance(svc, admin, victimId);
        return v.ready && v.pid > 0 && v.pid !== oldPid ? v : undefined;
      },
      120_000,
      500,
    );
    expect(isAlive(back.pid)).to.equal(true);
    expect(isAlive(oldPid)).to.equal(false);
  });

  it('takes a frozen tor (SIGSTOP) out of rotation: requests it held are re-routed and served, its sessions move, and it returns when thawed', async function () {
    this.timeout(UPSTREAM_DIAL_TIMEOUT_MS + 180_000);
    await svc.waitReady(3, 120_000);
    await pollUntil('all three routable', async () => ((await poolSummary(svc, admin)).routable === 3 ? true : undefined), 120_000, 500);
    const placed = await keysByInstance();
    const [frozenId, pinned] = [...placed.entries()].sort((a, b) => b[1].length - a[1].length)[0] as [number, string[]];
    const others = keys.filter((k) => !pinned.includes(k));
    expect(others.length, 'sessions on other instances').to.be.at.least(1);
    const pid = (await instance(svc, admin, frozenId)).pid;
    frozen.add(pid);
    expect(signal(pid, 'SIGSTOP')).to.equal(true);
    const frozenAt = Date.now();
    await pollUntil('tor stopped', () => (processState(pid) === 'T' ? true : undefined), 5_000, 50);

    // Sent before the pool can know: the kernel still accepts on the frozen SocksPort, so tor
    // holds their CONNECTs. Once the instance is reported down they are re-routed and served.
    const stuck = [
      socksRequest(proxy, pinned[0] as string, svc.whoamiUrl, CLIENT_DEADLINE_MS),
      httpProxyRequest(proxy, pinned[0] as string, svc.whoamiUrl, CLIENT_DEADLINE_MS),
    ];
    const loops = new TrafficLoops(proxy, others, svc.whoamiUrl, 30_000);
    loops.start();

    // The liveness probe notices the silent control port and the pool routes around it.
    await pollUntil('the frozen instance out of rotation', async () => ((await poolSummary(svc, admin)).routable === 2 ? true : undefined), 60_000, 250);
    const detectedAfterMs = Date.now() - frozenAt;
    const events = await apiJson<Array<{ type: string; instance?: number; message: string }>>(svc, '/api/events?limit=200', admin);
    expect(events.some((e) => e.type === 'instance' && e.instance === frozenId && /does not answer/.test(e.message)), 'audit event').to.equal(true);
    // Still frozen, yet every session that was pinned there is served: through another instance.
    expect(processState(pid)).to.equal('T');
    for (const key of pinned) {
      const r = await socksRequest(proxy, key, svc.whoamiUrl, 30_000);
      expect(r.ok, `${key} while its tor is frozen: ${r.error}`).to.equal(true);
      expect((await session(svc, admin, key)).instance, `${key} moved`).to.not.equal(frozenId);
    }
    expect(processState(pid), 'served while the tor was still frozen').to.equal('T');
    process.stdout.write(`      frozen tor out of rotation after ${detectedAfterMs} ms\n`);

    await pollUntil('other sessions served meanwhile', () => (loops.records.filter((r) => r.ok).length >= 5 * others.length ? true : undefined), 60_000);
    const records = await loops.stop();
    expect(records.filter((r) => !r.ok), failuresOf(records)).to.deep.equal([]);

    for (const r of await Promise.all(stuck)) {
      expect(r.ok, `${r.listener} request held by the frozen tor, re-routed: ${r.error}`).to.equal(true);
      expect(r.endedAt - r.startedAt, `${r.listener} served long before the dial deadline`).to.be.below(UPSTREAM_DIAL_TIMEOUT_MS / 2);
    }

    // Thawed (or, if it stayed silent past UNRESPONSIVE restart, replaced): back in rotation.
    thaw(pid);
    await pollUntil('all three routable again', async () => ((await poolSummary(svc, admin)).routable === 3 ? true : undefined), 120_000, 500);
    const back = await instance(svc, admin, frozenId);
    expect(back.ready).to.equal(true);
    expect(isAlive(back.pid)).to.equal(true);
  });

  it('recovers when every exit of the network disappears and returns: no request hangs, traffic resumes', async function () {
    this.timeout(UPSTREAM_DIAL_TIMEOUT_MS + 180_000);
    await svc.waitReady(3, 120_000);
    const exitPids = svc.net.nodes.filter((n) => n.role === 'exit').map((n) => n.pid);
    expect(exitPids.length).to.be.at.least(2);
    for (const pid of exitPids) {
      frozen.add(pid);
      expect(signal(pid, 'SIGSTOP')).to.equal(true);
    }
    const during = keys.slice(0, 3).flatMap((key) => [
      socksRequest(proxy, key, svc.whoamiUrl, CLIENT_DEADLINE_MS),
      httpProxyRequest(proxy, key, svc.whoamiUrl, CLIENT_DEADLINE_MS),
    ]);
    await new Promise((r) => setTimeout(r, 15_000));
    for (const pid of exitPids) thaw(pid);

    // Requests made during the outage end one way or the other, never by the client's deadline.
    for (const r of await Promise.all(during)) {
      if (!r.ok) expect(answeredByProxy(r), `${r.listener} ${r.key}: ${r.error}`).to.equal(true);
      expect(r.endedAt - r.startedAt).to.be.below(PROXY_ANSWER_DEADLINE_MS);
    }
    // Traffic resumes for every session once the exits are back.
    for (const key of keys) {
      await pollUntil(
        `${key} served after the exits returned`,
        async () => ((await socksRequest(proxy, key, svc.whoamiUrl, 30_000)).ok ? true : undefined),
        120_000,
        1000,
      );
    }
  });
});
