/**
 * Several nodes on one Redis (issue 21, first part): two real services on the private network
 * share a redis-server; their instances pin distinct exits (seen by real clients), a third
 * process under a name in use is refused, and the exits of a node killed with SIGKILL go to the
 * other node once its leases lapse (its instances that had to share a relay move onto them). Issue 31: two nodes never share a /24 that sites see, while
 * the network has enough (its exits leave from 7).
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExitsView, FleetPoolView, InstanceView, SessionView } from '../../shared/api/views.js';
import { addressBlock } from '../../supervisor/exits/exit-relay.js';
import { whoamiByInstance } from '../support/clients/exits-seen.js';
import { FLEET_COMMAND_TIMEOUT_MS } from '../../supervisor/fleet/fleet-member.js';
import { HealApi } from '../support/clients/api-client.js';
import { whoamiIp } from '../support/clients/api-reads.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { openSocksTunnel } from '../support/clients/socks5-client.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { waitFleetSettled } from '../support/clients/fleet-settled.js';
import { startService, SUITE_READY_TIMEOUT_MS, TEST_PROXY_TOKEN, type RunningService } from '../support/fixtures/service.js';
import { startHaproxy, type RunningHaproxy } from '../support/processes/haproxy.js';
import { waitAllGone } from '../support/processes/inspection.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';

/** The private network has 8 exits: two nodes of 4 use every one. */
const PER_NODE = 4;
const NODE_LEASE_MS = 3_000;
/** Shared by the nodes behind HAProxy (at least 32 characters). */
const FLEET_SIGNING_SECRET = 'fleet-e2e-signing-secret-0123456789';
/** The bound: a token issued or revoked through one node is in force on every node within a second. */
const TOKEN_EVERYWHERE_WITHIN_MS = 1_000;

describe('several nodes on one Redis (real services, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 3);
  let redis: RunningRedis;
  const running = new Map<string, RunningService>();
  let url = '';

  const node = async (name: string, env: Record<string, string> = {}): Promise<RunningService> => {
    const svc = await startService({ POOL_SIZE: String(PER_NODE), STATE_STORE: url, NODE_NAME: name, NODE_LEASE: `${NODE_LEASE_MS}ms`, ...env });
    running.set(name, svc);
    return svc;
  };
  /** Every instance's assigned exit on a node, once each has one. */
  const assignedExits = async (api: HealApi, size: number): Promise<string[]> => {
    const instances = await pollUntil('every instance assigned an exit', () => api.instances(), 60_000, {
      until: (list) => list.length === size && list.every((i) => i.assigned_exit !== null),
    });
    return instances.map((i) => i.assigned_exit?.fingerprint ?? '');
  };

  before(async () => {
    redis = await startRedis();
    url = `${redis.url}/fleet-e2e`;
  });
  after(async () => {
    for (const svc of running.values()) await svc.stop();
    await redis.stop();
  });

  it('two nodes started together pin distinct exits, and their clients leave through distinct IPs', async () => {
    const [a, b] = await Promise.all([node('node-a'), node('node-b')]);
    await Promise.all([a.waitReady(PER_NODE, SUITE_READY_TIMEOUT_MS), b.waitReady(PER_NODE, SUITE_READY_TIMEOUT_MS)]);
    const apiB = await HealApi.signIn(b);
    // Both chose while bootstrapping at the same time: a choice the other node leased first is
    // yielded within a renewal, so the settled state is what counts.
    const settled = await waitFleetSettled([a, b], PER_NODE, NODE_LEASE_MS);
    expect(new Set(settled).size).to.equal(8);

    // What clients see: sessions spread over each node's instances never share an IP across nodes.
    const ipsOf = async (svc: RunningService, prefix: string): Promise<Set<string>> => {
      const ips = new Set<string>();
      for (let i = 0; i < 8; i++) ips.add(await exitIpOf(svc, `${prefix}-${i}`));
      return ips;
    };
    const ipsA = await ipsOf(a, 'fleet-a');
    const ipsB = await ipsOf(b, 'fleet-b');
    expect([...ipsA].filter((ip) => ipsB.has(ip)), 'an IP on both nodes').to.deep.equal([]);

    // Each node's API says who holds the others (as of its last renewal: up to a third of NODE_LEASE behind).
    const ofA = settled.slice(0, PER_NODE).sort();
    const heldByAOf = (v: ExitsView): string[] => v.exits.filter((e) => e.held_by === 'node-a').map((e) => e.fingerprint).sort();
    const exitsB = await pollUntil("node-b's view of node-a's exits", () => apiB.json<ExitsView>('/api/exits'), 2 * NODE_LEASE_MS, {
      until: (v) => JSON.stringify(heldByAOf(v)) === JSON.stringify(ofA),
    });
    expect(exitsB.fleet).to.deep.equal({ node: 'node-b', nodes: ['node-a', 'node-b'] });
    expect(heldByAOf(exitsB)).to.deep.equal(ofA);
    expect(exitsB.exits.filter((e) => e.instances.length > 0).every((e) => e.held_by === null)).to.equal(true);
  });

  it('refuses a third process under a node name in use, naming NODE_NAME', async () => {
    const svc = await startService({ POOL_SIZE: '1', STATE_STORE: url, NODE_NAME: 'node-a', NODE_LEASE: `${NODE_LEASE_MS}ms` });
    await pollUntil('the start refused', () => svc.output(), 30_000, { until: (out) => /NODE_NAME: another running exitpool/.test(out) });
    await sleep(300);
    expect(await svc.stop()).to.equal(78);
    expect(svc.output()).to.match(/NODE_NAME: another running exitpool holds node name "node-a" on redis:\/\/127\.0\.0\.1:\d+\/fleet-e2e/);
  });

  it('frees the exits of a node killed with SIGKILL for the other node once its leases lapse: its instances that had to share a relay move onto them', async () => {
    const a = running.get('node-a') as RunningService;
    const b = running.get('node-b') as RunningService;
    const apiA = await HealApi.signIn(a);
    const apiB = await HealApi.signIn(b);
    const ofA = await assignedExits(apiA, PER_NODE);
    // node-b grows to 8 while node-a holds 4 of the network's 8 exits: two of node-b's instances on each relay it may use, said as a shortage.
    expect((await apiB.resize(2 * PER_NODE)).size).to.equal(2 * PER_NODE);
    await b.waitReady(2 * PER_NODE, SUITE_READY_TIMEOUT_MS);
    const crowded = await assignedExits(apiB, 2 * PER_NODE);
    // The first test's sessions are on node-b's first instances: those keep their exit (and so their sessions' IP) through what follows.
    const exitOfBusy = async (): Promise<Map<number, string>> => new Map((await apiB.instances()).filter((i) => i.sessions > 0).map((i) => [i.id, i.assigned_exit?.fingerprint ?? '']));
    const busyBefore = await exitOfBusy();
    expect(busyBefore.size, 'node-b serves sessions from the first test').to.be.at.least(1);
    expect(crowded.filter((f) => ofA.includes(f)), 'none of node-a’s exits').to.deep.equal([]);
    expect(new Set(crowded).size, 'relays shared on node-b').to.be.at.most(PER_NODE);
    expect((await apiB.json<ExitsView>('/api/exits')).shortages.length, 'the shortage said').to.be.at.least(PER_NODE);
    const tors = (await apiA.instances()).map((i) => i.pid).filter((p) => p > 0);
    process.kill(a.pid, 'SIGKILL');
    running.delete('node-a');
    const killedAt = Date.now();
    const freed = await pollUntil('node-b no longer sees node-a', () => apiB.json<ExitsView>('/api/exits'), 4 * NODE_LEASE_MS, {
      until: (v) => v.exits.every((e) => e.held_by === null) && v.fleet?.nodes.length === 1,
    });
    expect(freed.fleet).to.deep.equal({ node: 'node-b', nodes: ['node-b'] });
    expect(Date.now() - killedAt, 'not before the lease could lapse').to.be.at.least(NODE_LEASE_MS / 2);
    expect(await waitAllGone(tors, 60_000), 'the killed node’s tors exited').to.deep.equal([]);
    // Without being asked, node-b's instances that shared a relay move onto the freed exits: 8 instances, 8 distinct exits, node-a's among them.
    const spread = await pollUntil('node-b on 8 distinct exits', () => assignedExits(apiB, 2 * PER_NODE), 60_000, { until: (all) => new Set(all).size === 2 * PER_NODE }).catch(async (e: unknown) => {
      // What node-b knew and did.
      const exits = await apiB.json<ExitsView>('/api/exits');
      throw new Error(`${(e as Error).message}\nexits: ${JSON.stringify(exits)}\nnode-b's audit: ${JSON.stringify(await apiB.trail(80))}`);
    });
    expect(ofA.every((f) => spread.includes(f)), 'node-a’s exits now node-b’s').to.equal(true);
    const busyAfter = await exitOfBusy();
    expect([...busyBefore].map(([id]) => [id, busyAfter.get(id)]), 'an instance serving sessions keeps its exit: the idle one sharing its relay moved').to.deep.equal([...busyBefore]);
    const moves = (await apiB.events(500)).filter((ev) => ev.type === 'exit' && ev.details.reason === 'relay_shared');
    expect(moves.length, 'moves off a shared relay, audited').to.be.at.least(1);
    expect(moves.every((ev) => ev.instance !== null && /shares exit \S+ \(.+\) with instance.* while a relay of its own is free: it moves to another exit/.test(ev.message))).to.equal(true);
  });
});

describe('a session through any of 3 nodes behind HAProxy (real services, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 3);
  let redis: RunningRedis;
  let balancer: RunningHaproxy;
  const nodes = new Map<string, RunningService>();
  const names = ['node-1', 'node-2', 'node-3'];
  /** 3 nodes of 2 instances: 6 of the network's 8 exits. */
  const SIZE = 2;

  before(async () => {
    redis = await startRedis();
    const started = await Promise.all(
      // One SIGNING_SECRET (and the tests' one ADMIN_PASSWORD) for all: a sign-in on one node is valid on every node.
      names.map((name) =>
        startService({ POOL_SIZE: String(SIZE), STATE_STORE: `${redis.url}/behind-haproxy`, NODE_NAME: name, NODE_LEASE: `${NODE_LEASE_MS}ms`, NODE_ADDRESS: '127.0.0.1', SIGNING_SECRET: FLEET_SIGNING_SECRET }),
      ),
    );
    started.forEach((svc, i) => nodes.set(names[i] as string, svc));
    await Promise.all(started.map((svc) => svc.waitReady(SIZE, SUITE_READY_TIMEOUT_MS)));
    await waitFleetSettled(started, SIZE, NODE_LEASE_MS);
    balancer = await startHaproxy(started.map((svc) => `127.0.0.1:${svc.socksPort}`), { healthChecks: true });
  });
  after(async () => {
    await balancer?.stop();
    for (const svc of nodes.values()) await svc.stop();
    await redis.stop();
  });

  const whoami = (): string => (nodes.get('node-1') as RunningService).whoamiUrl;
  const viaSocks = async (port: number, key: string): Promise<string> => {
    const r = await curlSocks(port, key, TEST_PROXY_TOKEN, whoami());
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  const viaHttp = async (port: number, key: string): Promise<string> => {
    const r = await curlHttp(port, key, TEST_PROXY_TOKEN, whoami());
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  /** The node whose table holds the session (exactly one). Each is asked about its own table: the header keeps it from passing the request on. */
  const ownerOf = async (key: string): Promise<string> => {
    const holding: string[] = [];
    for (const [name, svc] of nodes) {
      const r = await svc.api(`/api/sessions/${encodeURIComponent(key)}`, { bearer: await svc.login(), headers: { 'exitpool-forwarded-by': 'test' } });
      if (r.status === 200) holding.push(name);
    }
    expect(holding, `nodes holding ${key}`).to.have.length(1);
    return holding[0] as string;
  };

  it('keeps one exit for a session whichever node each connection reaches, through SOCKS5 and the HTTP proxy', async () => {
    for (const key of ['crawl-1', 'crawl-2', 'crawl-3']) {
      const ips = new Set<string>();
      // Round robin: 9 connections, 3 through each node.
      for (let i = 0; i < 9; i++) ips.add(await viaSocks(balancer.port, key));
      // Straight to every node's listeners too, both protocols.
      for (const svc of nodes.values()) {
        ips.add(await viaSocks(svc.socksPort, key));
        ips.add(await viaHttp(svc.httpPort, key));
      }
      expect([...ips], `${key}: one exit`).to.have.length(1);
      const owner = await ownerOf(key);
      const api = await HealApi.signIn(nodes.get(owner) as RunningService);
      // Every connection is counted once, on the owner (15 here; forwarded ones included).
      const s = await pollUntil('15 requests on the owner', () => api.session(key), 10_000, { until: (v) => v.requests === 15 });
      expect(s.exit_ip).to.equal([...ips][0]);
    }
    // Any node lists every node with its instances (as each last described itself).
    const fleetView = await pollUntil(
      'every node described in GET /api/fleet',
      async () => (await HealApi.signIn(nodes.get('node-3') as RunningService)).json<FleetPoolView>('/api/fleet'),
      3 * NODE_LEASE_MS,
      { until: (v) => v.nodes.length === 3 && v.nodes.every((n) => n.instances.length === SIZE && n.instances.every((i) => i.ready && i.exit_fingerprint !== '')) },
    );
    expect(fleetView.node).to.equal('node-3');
    expect(fleetView.nodes.map((n) => n.node)).to.deep.equal(names);
    const fingerprints = fleetView.nodes.flatMap((n) => n.instances.map((i) => i.exit_fingerprint));
    expect(new Set(fingerprints).size, 'distinct exits across the fleet').to.equal(3 * SIZE);
    // /metrics stays per node, every sample labelled with it.
    for (const [name, svc] of nodes) {
      const { text } = await (await HealApi.signIn(svc)).metricsText();
      expect(text).to.include(`pool_instances_total{node="${name}"} ${SIZE}`);
    }
  });

  it('answers for a session through any node’s API: read, report, rotate and delete reach its owner', async () => {
    const key = 'api-anywhere';
    const first = await viaSocks(balancer.port, key);
    const owner = await ownerOf(key);
    const others = [...nodes].filter(([name]) => name !== owner).map(([, svc]) => svc);
    const asProxy = (svc: RunningService, path: string, method = 'GET', body?: unknown): Promise<Response> =>
      svc.api(path, { method, bearer: TEST_PROXY_TOKEN, ...(body === undefined ? {} : { body }) });
    for (const svc of others) {
      const r = await asProxy(svc, `/api/sessions/${key}`);
      expect(r.status).to.equal(200);
      expect(((await r.json()) as SessionView).exit_ip).to.equal(first);
    }
    const other = others[0] as RunningService;
    expect((await asProxy(other, `/api/sessions/${key}/failure`, 'POST', { kind: 'other', reason: 'through another node' })).status).to.equal(200);
    const ownerApi = await HealApi.signIn(nodes.get(owner) as RunningService);
    expect((await ownerApi.session(key)).failures, 'the report counted on the owner').to.equal(1);
    const rotated = await asProxy(other, `/api/sessions/${key}/rotate`, 'POST');
    expect(rotated.status).to.equal(200);
    const after = ((await rotated.json()) as { exit_ip: string }).exit_ip;
    const next = await viaSocks(balancer.port, key);
    expect(next, 'a new exit, whichever node the next connections reach').to.not.equal(first);
    if (after !== '') expect(next).to.equal(after);
    for (let i = 0; i < 3; i++) expect(await viaSocks(balancer.port, key)).to.equal(next);
    // A request already passed on once is answered where it lands (no loop): here, unknown.
    expect((await other.api(`/api/sessions/${key}`, { bearer: TEST_PROXY_TOKEN, headers: { 'exitpool-forwarded-by': 'node-x' } })).status).to.equal(404);
    // A sign-in made on another node reaches the owner too: the nodes share SIGNING_SECRET and ADMIN_PASSWORD.
    const signedIn = await other.api(`/api/sessions/${key}`, { bearer: await other.login() });
    expect(signedIn.status).to.equal(200);
    expect(((await signedIn.json()) as SessionView).key).to.equal(key);
    expect((await asProxy(other, `/api/sessions/${key}`, 'DELETE')).status).to.equal(204);
    expect((await ownerApi.raw(`/api/sessions/${key}`)).status, 'deleted on its owner').to.equal(404);
    expect((await asProxy(other, `/api/sessions/${key}`)).status, 'and nowhere else').to.equal(404);
  });

  it('takes a token created through one node on every node, and a revocation through another everywhere within a second', async () => {
    const accepted = async (svc: RunningService, secret: string): Promise<boolean> => {
      const outcome = await openSocksTunnel({ port: svc.socksPort, username: 'token-check', password: secret, host: 'whoami.testnet', targetPort: svc.net.whoami.port });
      if (outcome.kind === 'open') outcome.socket.destroy();
      return outcome.kind === 'open';
    };
    const api1 = await HealApi.signIn(nodes.get('node-1') as RunningService);
    const created = await api1.json<{ id: string; secret: string }>('/api/tokens', { method: 'POST', body: { name: 'fleet-wide', scope: 'proxy' } }, 201);
    for (const [name, svc] of nodes) {
      await pollUntil(`${name} takes the new token`, () => accepted(svc, created.secret), TOKEN_EVERYWHERE_WITHIN_MS, { until: (ok) => ok, intervalMs: 20 });
      expect((await curlSocks(svc.socksPort, 'token-user', created.secret, whoami())).code, name).to.equal(0);
      const listed = await (await HealApi.signIn(svc)).json<{ id: string }[]>('/api/tokens');
      expect(listed.map((t) => t.id), name).to.include(created.id);
    }
    const api3 = await HealApi.signIn(nodes.get('node-3') as RunningService);
    expect((await api3.raw(`/api/tokens/${created.id}`, { method: 'DELETE' })).status).to.equal(204);
    const revokedAt = Date.now();
    for (const [name, svc] of nodes) {
      await pollUntil(`${name} refuses the revoked token`, () => accepted(svc, created.secret), TOKEN_EVERYWHERE_WITHIN_MS - (Date.now() - revokedAt), { until: (ok) => !ok, intervalMs: 20 });
    }
    for (const svc of nodes.values()) expect((await curlSocks(svc.socksPort, 'token-user', created.secret, whoami())).code).to.not.equal(0);
  });

  it('moves the sessions of a node killed with SIGKILL to the others on their next request, audited', async () => {
    // A session owned by node-2: started straight on it.
    const key = 'owned-by-node-2';
    const n2 = nodes.get('node-2') as RunningService;
    const before = await viaSocks(n2.socksPort, key);
    expect(await ownerOf(key)).to.equal('node-2');
    expect(await viaSocks(balancer.port, key)).to.equal(before);
    const tors = (await (await HealApi.signIn(n2)).instances()).map((i) => i.pid).filter((p) => p > 0);
    process.kill(n2.pid, 'SIGKILL');
    nodes.delete('node-2');
    expect(await waitAllGone(tors, 60_000)).to.deep.equal([]);
    // Once its lease lapsed (and HAProxy stopped sending to it), the next request is served.
    await sleep(NODE_LEASE_MS + 1_000);
    const after = await pollUntil('the session served again', () => viaSocks(balancer.port, key).catch(() => undefined), 15_000, 500);
    expect(after).to.match(/^127\./);
    const owner = await ownerOf(key);
    expect(owner).to.not.equal('node-2');
    const api = await HealApi.signIn(nodes.get(owner) as RunningService);
    const events = await api.events(200);
    expect(events.some((e) => e.session === key && e.details?.reason === 'owner_gone' && e.details.from_node === 'node-2'), 'the take-over audited').to.equal(true);
    // And it stays there, whichever node the next connections reach.
    for (let i = 0; i < 4; i++) expect(await viaSocks(balancer.port, key)).to.equal(after);
  });
});

describe('several nodes while Redis stops and starts again (real services, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 3);
  let redis: RunningRedis;
  const nodes = new Map<string, RunningService>();
  const SIZE = 2;

  before(async () => {
    redis = await startRedis({ persist: true });
    const started = await Promise.all(
      ['node-a', 'node-b'].map((name) => startService({ POOL_SIZE: String(SIZE), STATE_STORE: `${redis.url}/outage`, NODE_NAME: name, NODE_LEASE: `${NODE_LEASE_MS}ms`, NODE_ADDRESS: '127.0.0.1' })),
    );
    nodes.set('node-a', started[0] as RunningService);
    nodes.set('node-b', started[1] as RunningService);
    await Promise.all(started.map((svc) => svc.waitReady(SIZE, SUITE_READY_TIMEOUT_MS)));
    await waitFleetSettled(started, SIZE, NODE_LEASE_MS);
  });
  after(async () => {
    for (const svc of nodes.values()) await svc.stop();
    await redis.stop();
  });

  const node = (name: string): RunningService => nodes.get(name) as RunningService;
  const viaSocks = async (svc: RunningService, key: string): Promise<string> => {
    const r = await curlSocks(svc.socksPort, key, TEST_PROXY_TOKEN, svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  const exitsOf = async (svc: RunningService): Promise<string[]> => (await (await HealApi.signIn(svc)).instances()).map((i) => i.assigned_exit?.fingerprint ?? '');

  it('serves what every node knows while Redis is down, serves new sessions where they land, and settles again once it is back', async () => {
    const a = node('node-a');
    const b = node('node-b');
    const owned = await viaSocks(a, 'owned-by-a');
    expect(await viaSocks(b, 'owned-by-a'), 'forwarded to node-a').to.equal(owned);
    const exitsBefore = [...(await exitsOf(a)), ...(await exitsOf(b))];
    expect(new Set(exitsBefore).size).to.equal(2 * SIZE);

    await redis.restart({
      whileDown: async () => {
        // Down: node-a serves its session, node-b still forwards it (the owner is remembered),
        // and a session new to node-b is served by node-b after the claim gives up.
        for (let i = 0; i < 3; i++) {
          expect(await viaSocks(a, 'owned-by-a')).to.equal(owned);
          expect(await viaSocks(b, 'owned-by-a')).to.equal(owned);
        }
        const started = Date.now();
        await viaSocks(b, 'new-while-down');
        expect(Date.now() - started, 'one claim timeout at most, plus the request').to.be.below(FLEET_COMMAND_TIMEOUT_MS + 5_000);
        expect(await (await HealApi.signIn(b)).session('new-while-down')).to.include({ requests: 1 });
        // One name reaching both nodes while they cannot agree: two sessions for now.
        await viaSocks(a, 'split-while-down');
        await viaSocks(b, 'split-while-down');
        expect((await a.api('/health')).status).to.equal(200);
        expect((await b.api('/health')).status).to.equal(200);
        // Long enough for every lease to lapse in Redis's clock were it up.
        await sleep(NODE_LEASE_MS);
      },
    });

    // Back (its append-only file kept what it had): both nodes renew, claim their exits and the
    // session that began while it was away.
    const exitsAfter = await pollUntil(
      'both nodes on their exits again, and each other known',
      async () => {
        const [va, vb] = await Promise.all([a, b].map(async (svc) => (await HealApi.signIn(svc)).json<ExitsView>('/api/exits')));
        if (va?.fleet?.nodes.length !== 2 || vb?.fleet?.nodes.length !== 2) return undefined;
        return [...(await exitsOf(a)), ...(await exitsOf(b))];
      },
      4 * NODE_LEASE_MS,
      { until: (all) => all !== undefined && new Set(all).size === 2 * SIZE },
    );
    expect(exitsAfter, 'nobody moved: the same exits as before the outage').to.deep.equal(exitsBefore);
    const throughB = await viaSocks(b, 'owned-by-a');
    if (throughB !== owned) {
      // Seen in 2 of 5 CI runs of 0.2.0 and 2 of 8 runs here (node-b renewed before node-a once Redis
      // was back, and took node-a for gone: supervisor/fleet/README.md, "Peers awaited after an
      // outage"): what each node did with the name.
      const about = async (svc: RunningService): Promise<string[]> => (await (await HealApi.signIn(svc)).events(200)).filter((e) => e.session === 'owned-by-a').map((e) => `${e.time} ${e.message}`);
      const warned = (svc: RunningService): string[] => svc.output().split('\n').filter((l) => /owned-by-a|cannot be reached|unreachable|taken over/.test(l));
      expect.fail(`owned-by-a through node-b left from ${throughB}, not ${owned}\nnode-a: ${JSON.stringify(await about(a))}\nnode-b: ${JSON.stringify(await about(b))}\nnode-b log: ${JSON.stringify(warned(b))}`);
    }
    // Names served while Redis was away (one on node-b only, one on both): once it is back, each
    // is held by exactly one node (the first to renew it or to be asked), the other gives its copy
    // up (audited), and both nodes send the name through one exit.
    const heldBy = (key: string) => async (): Promise<string[]> => {
      const held: string[] = [];
      for (const [name, svc] of nodes) {
        // Asked of each node itself: the header keeps it from passing the request to the owner.
        const r = await svc.api(`/api/sessions/${key}`, { bearer: await svc.login(), headers: { 'exitpool-forwarded-by': 'test' } });
        if (r.status === 200) held.push(name);
      }
      return held;
    };
    for (const key of ['new-while-down', 'split-while-down']) {
      // Both nodes use the name, so that each renews or asks for it.
      await viaSocks(a, key);
      await viaSocks(b, key);
      await pollUntil(`one node keeps ${key}`, heldBy(key), 3 * NODE_LEASE_MS, { until: (held) => held.length === 1 });
      const ip = await viaSocks(a, key);
      for (let i = 0; i < 2; i++) {
        expect(await viaSocks(b, key), key).to.equal(ip);
        expect(await viaSocks(a, key), key).to.equal(ip);
      }
    }
    const holders = await heldBy('split-while-down')();
    const loser = holders[0] === 'node-a' ? b : a;
    const events = await (await HealApi.signIn(loser)).events(100);
    expect(events.some((e) => e.session === 'split-while-down' && e.details?.reason === 'owned_elsewhere'), 'the copy given up, audited').to.equal(true);
  });
});

describe('two nodes on one Redis never share a /24 sites see (real services, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 3);
  /** Two nodes of two: four instances, and the network's exits leave from seven /24s. */
  const SMALL_NODE = 2;
  let redis: RunningRedis;
  const nodes: RunningService[] = [];

  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    for (const svc of nodes) await svc.stop();
    await redis.stop();
  });

  it('two nodes started together leave from four distinct /24s, each instance’s exit_ip what the destination sees, and lease them in Redis', async () => {
    const url = `${redis.url}/fleet-e2e-24`;
    const start = (name: string): Promise<RunningService> => startService({ POOL_SIZE: String(SMALL_NODE), STATE_STORE: url, NODE_NAME: name, NODE_LEASE: `${NODE_LEASE_MS}ms` });
    nodes.push(...(await Promise.all([start('node-c'), start('node-d')])));
    const [c, d] = nodes as [RunningService, RunningService];
    await Promise.all([c.waitReady(SMALL_NODE, SUITE_READY_TIMEOUT_MS), d.waitReady(SMALL_NODE, SUITE_READY_TIMEOUT_MS)]);
    const apis = await Promise.all([c, d].map((svc) => HealApi.signIn(svc)));
    // Settled: every instance serving on a measured exit of its own /24, for a whole renewal.
    const read = async (): Promise<InstanceView[] | undefined> => {
      const all = (await Promise.all(apis.map((api) => api.instances()))).flat();
      if (all.length !== 2 * SMALL_NODE || all.some((i) => !i.ready || i.rotating || i.exit_ip_source !== 'probe' || !i.assigned_exit?.distinct)) return undefined;
      return new Set(all.map((i) => addressBlock(i.exit_ip))).size === all.length ? all : undefined;
    };
    let settled: InstanceView[] | undefined;
    for (let tries = 0; settled === undefined && tries < 10; tries++) {
      const first = await pollUntil('four instances on four /24s', read, 120_000);
      await sleep(NODE_LEASE_MS);
      const again = await read();
      if (again && JSON.stringify(again.map((i) => i.exit_ip)) === JSON.stringify(first.map((i) => i.exit_ip))) settled = again;
    }
    if (!settled) throw new Error('the fleet never settled on four /24s');
    // What the destination sees, node by node.
    const seenC = await whoamiByInstance(c, apis[0] as HealApi, SMALL_NODE, 'fleet-24-c');
    const seenD = await whoamiByInstance(d, apis[1] as HealApi, SMALL_NODE, 'fleet-24-d');
    const blocks = [...seenC.values(), ...seenD.values()].map(addressBlock);
    expect(new Set(blocks).size, `the /24s sites see: ${blocks.join(' ')}`).to.equal(2 * SMALL_NODE);
    // Each node leases the /24s its instances leave from.
    const leases = (await Promise.all(apis.map((api) => api.instances()))).map((is) => is.map((i) => `block:${i.assigned_exit?.block ?? ''}`));
    const exitsOfC = await apis[0]?.json<ExitsView>('/api/exits');
    expect(exitsOfC?.shortages).to.deep.equal([]);
    const { Redis } = await import('ioredis');
    const raw = new Redis(redis.url);
    try {
      for (const [n, name] of ['node-c', 'node-d'].entries()) {
        for (const unit of leases[n] ?? []) expect(await raw.get(`exitpool:fleet-e2e-24:fleet:unit:${unit}`), `${name} leases ${unit}`).to.equal(name);
      }
    } finally {
      raw.disconnect();
    }
  });
});
