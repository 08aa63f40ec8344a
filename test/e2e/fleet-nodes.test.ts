/**
 * Several nodes on one Redis (issue 21, first part): two real services on the private network
 * share a redis-server; their instances pin distinct exits (seen by real clients), a third
 * process under a name in use is refused, and the exits of a node killed with SIGKILL go to the
 * other node once its leases lapse.
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExitsView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { startService, SUITE_READY_TIMEOUT_MS, type RunningService } from '../support/fixtures/service.js';
import { waitAllGone } from '../support/processes/inspection.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';

/** The private network has 8 exits: two nodes of 4 use every one. */
const PER_NODE = 4;
const NODE_LEASE_MS = 3_000;

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
    const [apiA, apiB] = await Promise.all([HealApi.signIn(a), HealApi.signIn(b)]);
    // Both chose while bootstrapping at the same time: a choice the other node leased first is
    // yielded within a renewal, so the settled state is what counts.
    const settled = await pollUntil(
      'the two nodes on 8 distinct exits',
      async () => [...(await assignedExits(apiA, PER_NODE)), ...(await assignedExits(apiB, PER_NODE))],
      60_000,
      { until: (all) => new Set(all).size === 2 * PER_NODE },
    );
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

  it('frees the exits of a node killed with SIGKILL for the other node once its leases lapse', async () => {
    const a = running.get('node-a') as RunningService;
    const b = running.get('node-b') as RunningService;
    const apiA = await HealApi.signIn(a);
    const apiB = await HealApi.signIn(b);
    const ofA = await assignedExits(apiA, PER_NODE);
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
    // node-b grows onto the freed exits: 8 instances, 8 distinct exits, node-a's among them.
    expect((await apiB.resize(2 * PER_NODE)).size).to.equal(2 * PER_NODE);
    await b.waitReady(2 * PER_NODE, SUITE_READY_TIMEOUT_MS);
    const grown = await pollUntil('node-b on 8 distinct exits', () => assignedExits(apiB, 2 * PER_NODE), 60_000, { until: (all) => new Set(all).size === 2 * PER_NODE });
    expect(ofA.every((f) => grown.includes(f)), 'node-a’s exits now node-b’s').to.equal(true);
  });
});
