/**
 * A fleet that a lost Redis or a stolen hop credential does not open (issue 35): two real
 * services on the private network and a redis-server of their own, each case of
 * docs/security.md's threat table reproduced as the review ran it:
 *
 * - a hop credential sniffed between two nodes opens nothing but its session on its owner's hop
 *   listener, never a client listener, and dies with its token;
 * - one budget for a token whose sessions two nodes own;
 * - a token revoked while a node was down stays revoked after Redis lost its data and that node
 *   starts again; the operator's FLEET_RESEED brings the fleet back together.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { FailureResult } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { whoamiIp } from '../support/clients/api-reads.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { waitFleetSettled } from '../support/clients/fleet-settled.js';
import { openSocksTunnel } from '../support/clients/socks5-client.js';
import { startService, SUITE_READY_TIMEOUT_MS, TEST_PROXY_TOKEN, type RunningService } from '../support/fixtures/service.js';
import { freePort } from '../support/network/free-ports.js';
import { startSniffingRelay, type SniffingRelay } from '../support/network/sniffing-relay.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';

const SIZE = 2;
const NODE_LEASE_MS = 3_000;
/** A renewal runs every third of the lease. */
const RENEWAL_MS = NODE_LEASE_MS / 3;
/** CLIENT_REPORT_BUDGET for these nodes: small, so a loop of reports spends it. */
const BUDGET = 4;
/** A token issued or revoked through one node is in force on every node within a second (issue 21). */
const TOKEN_EVERYWHERE_WITHIN_MS = 1_000;
/** node-b's hops and API requests go through the eavesdropper on this loopback address. */
const SNIFFED_ADDRESS = '127.0.0.2';

describe('a fleet that a lost Redis or a stolen hop credential does not open (real services, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 5);
  let redis: RunningRedis;
  let raw: Redis;
  let url = '';
  const dataDirs = { 'node-a': '', 'node-b': '' };
  const nodes = new Map<'node-a' | 'node-b', RunningService>();
  const relays: SniffingRelay[] = [];
  let hopRelay: SniffingRelay;

  const start = (name: 'node-a' | 'node-b', env: Record<string, string> = {}): Promise<RunningService> =>
    startService({
      POOL_SIZE: String(SIZE),
      STATE_STORE: url,
      NODE_NAME: name,
      NODE_LEASE: `${NODE_LEASE_MS}ms`,
      NODE_ADDRESS: '127.0.0.1',
      CLIENT_REPORT_BUDGET: `${BUDGET}/10m`,
      DATA_DIR: dataDirs[name],
      ...env,
    });
  const node = (name: 'node-a' | 'node-b'): RunningService => nodes.get(name) as RunningService;
  const accepted = async (svc: RunningService, secret: string): Promise<boolean> => {
    const outcome = await openSocksTunnel({ port: svc.socksPort, username: 'token-check', password: secret, host: 'whoami.testnet', targetPort: svc.net.whoami.port });
    if (outcome.kind === 'open') outcome.socket.destroy();
    return outcome.kind === 'open';
  };
  const viaSocks = async (port: number, key: string, password: string): Promise<string> => {
    const r = await curlSocks(port, key, password, node('node-a').whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  const issue = async (svc: RunningService, name: string): Promise<{ id: string; secret: string }> =>
    (await HealApi.signIn(svc)).json<{ id: string; secret: string }>('/api/tokens', { method: 'POST', body: { name, scope: 'proxy' } }, 201);
  const events = async (svc: RunningService): Promise<AuditEvent[]> => (await HealApi.signIn(svc)).events(200);
  const reasonSeen = (svc: RunningService, reason: string): Promise<AuditEvent> =>
    pollUntil(`${reason} audited`, async () => (await events(svc)).find((e) => e.details.reason === reason), 6 * RENEWAL_MS + 5_000);

  before(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
    url = `${redis.url}/issue-35`;
    for (const name of ['node-a', 'node-b'] as const) dataDirs[name] = fs.mkdtempSync(path.join(os.tmpdir(), `exitpool-e2e-${name}-`));
    // node-b publishes 127.0.0.2 as its address: its hops (and API requests) cross an eavesdropper there.
    const hopPortB = await freePort();
    const [a, b] = await Promise.all([start('node-a'), start('node-b', { NODE_ADDRESS: SNIFFED_ADDRESS, HOP_PORT: String(hopPortB) })]);
    nodes.set('node-a', a);
    nodes.set('node-b', b);
    hopRelay = await startSniffingRelay({ host: SNIFFED_ADDRESS, port: hopPortB }, { host: '127.0.0.1', port: hopPortB });
    relays.push(hopRelay, await startSniffingRelay({ host: SNIFFED_ADDRESS, port: b.apiPort }, { host: '127.0.0.1', port: b.apiPort }));
    await Promise.all([a.waitReady(SIZE, SUITE_READY_TIMEOUT_MS), b.waitReady(SIZE, SUITE_READY_TIMEOUT_MS)]);
    // The first test compares IPs: a choice the other node claimed first moves after ready.
    await waitFleetSettled([a, b], SIZE, NODE_LEASE_MS);
  });
  after(async () => {
    for (const relay of relays) await relay.close();
    for (const svc of nodes.values()) await svc.stop();
    raw?.disconnect();
    await redis?.stop();
    for (const dir of Object.values(dataDirs)) if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a hop credential sniffed between two nodes opens only its session on its owner’s hop listener, never a client listener, and dies with its token', async () => {
    const a = node('node-a');
    const b = node('node-b');
    const token = await issue(a, 'hop-carrier');
    await pollUntil('node-b takes the token', () => accepted(b, token.secret), TOKEN_EVERYWHERE_WITHIN_MS * 2, { until: (ok) => ok, intervalMs: 20 });
    // A session node-b owns, reached through node-a: forwarded over the hop, which the eavesdropper reads.
    const key = 'owned-by-b';
    const ipB = await viaSocks(b.socksPort, key, token.secret);
    expect(await viaSocks(a.socksPort, key, token.secret), 'forwarded to its owner').to.equal(ipB);
    const stolen = hopRelay.sniffed.find((c) => c.username === key);
    expect(stolen, 'the hop crossed the eavesdropper').to.not.equal(undefined);
    const { username, password } = stolen as { username: string; password: string };
    // Signed by node-a for this session and minute, carrying the client's token (not its secret).
    expect(password).to.match(new RegExp(`^th1~node-a~\\d+~[A-Za-z0-9_-]{12}~token:${token.id}~[A-Za-z0-9_-]{43}$`));
    expect(password).to.not.include(token.secret);
    expect(await raw.exists('exitpool:issue-35:fleet:forward-secret'), 'no fleet-wide forwarding secret').to.equal(0);

    // Replayed on the owner's hop listener within its window: that one session, as the owner serves it.
    const replayed = await viaSocks(b.hopPort, username, password);
    if (replayed !== ipB) {
      // Seen once in CI (not reproduced alone): say where node-b had the session and what its pool did.
      const api = await HealApi.signIn(b);
      const session = await api.json<unknown>(`/api/sessions/${key}`, { bearer: token.secret });
      expect.fail(`replayed for its own session: ${replayed}, not ${ipB}; node-b's session ${JSON.stringify(session)}; its newest events ${JSON.stringify(await api.trail())}`);
    }
    // Anything else: refused in the handshake (curl 97), or 407.
    for (const [label, r] of [
      ['another session on the hop listener', await curlSocks(b.hopPort, 'another-session', password, b.whoamiUrl)],
      ['the owner’s client SOCKS listener', await curlSocks(b.socksPort, username, password, b.whoamiUrl)],
      ['the forwarder’s client SOCKS listener', await curlSocks(a.socksPort, username, password, a.whoamiUrl)],
      ['a proxy token on the hop listener', await curlSocks(b.hopPort, username, token.secret, b.whoamiUrl)],
      ['the operator’s proxy token on the hop listener', await curlSocks(b.hopPort, username, TEST_PROXY_TOKEN, b.whoamiUrl)],
    ] as const) {
      expect(r.code, label).to.equal(97);
    }
    const http = await curlHttp(b.httpPort, username, password, b.whoamiUrl, ['-o', '/dev/null', '-w', '%{http_code}']);
    expect(http.stdout, 'the owner’s HTTP proxy').to.equal('407');

    // The token revoked (through either node): its hops are refused at once, sniffed or not.
    expect((await (await HealApi.signIn(a)).raw(`/api/tokens/${token.id}`, { method: 'DELETE' })).status).to.equal(204);
    await pollUntil('the sniffed hop refused', async () => (await curlSocks(b.hopPort, username, password, b.whoamiUrl)).code, TOKEN_EVERYWHERE_WITHIN_MS * 2, { until: (code) => code === 97, intervalMs: 50 });
  });

  it('one budget for a token whose sessions two nodes own (CLIENT_REPORT_BUDGET counted across the fleet)', async () => {
    const a = node('node-a');
    const b = node('node-b');
    const token = await issue(b, 'reporter');
    await pollUntil('node-a takes the token', () => accepted(a, token.secret), TOKEN_EVERYWHERE_WITHIN_MS * 2, { until: (ok) => ok, intervalMs: 20 });
    const owned: [RunningService, string][] = [];
    for (let i = 0; i < 4; i++) {
      await viaSocks(a.socksPort, `budget-a-${i}`, token.secret);
      owned.push([a, `budget-a-${i}`]);
      await viaSocks(b.socksPort, `budget-b-${i}`, token.secret);
      owned.push([b, `budget-b-${i}`]);
    }
    // 16 reports with one token, alternating between the two owners (each answers about its own sessions).
    let scored = 0;
    for (let round = 0; round < 2; round++) {
      for (const [svc, key] of owned) {
        const r = await svc.api(`/api/sessions/${key}/failure`, { method: 'POST', bearer: token.secret, body: { kind: 'rate_limited', reason: 'issue 35: N budgets' } });
        expect(r.status, key).to.equal(200);
        if (((await r.json()) as FailureResult).scored) scored++;
      }
    }
    // Per node it was BUDGET each (2 × BUDGET here); across the fleet: one budget, and at most one
    // unit more, let through by the node whose view of the count was one spend behind.
    expect(scored).to.be.within(BUDGET, BUDGET + 1);
    const counters = await raw.keys(`exitpool:issue-35:fleet:budget:report:*:token:${token.id}`);
    expect(counters).to.have.length(1);
    expect(Number(await raw.get(counters[0] as string))).to.equal(scored);
  });

  it('a token revoked while a node was down stays revoked after Redis lost its data; FLEET_RESEED brings the fleet together again', async () => {
    let a = node('node-a');
    let b = node('node-b');
    // The review's reproduction: issue a token, stop B, revoke it through A, lose Redis's data, start B.
    const token = await issue(a, 'to-revoke');
    await pollUntil('node-b takes the token', () => accepted(b, token.secret), TOKEN_EVERYWHERE_WITHIN_MS * 2, { until: (ok) => ok, intervalMs: 20 });
    expect(await b.stop()).to.equal(0);
    nodes.delete('node-b');
    expect((await (await HealApi.signIn(a)).raw(`/api/tokens/${token.id}`, { method: 'DELETE' })).status).to.equal(204);
    await raw.flushall();
    const lost = await reasonSeen(a, 'fleet_data_lost');
    const epoch = String(lost.details.epoch);
    expect(lost.message).to.include(`FLEET_RESEED=${epoch}`);

    b = await start('node-b');
    nodes.set('node-b', b);
    await b.waitReady(SIZE, SUITE_READY_TIMEOUT_MS);
    expect(b.output()).to.match(/Redis holds no fleet epoch \(it lost its data\?\), not this node's/);
    // Served nowhere: node-b learned the revocation node-a told again; nothing re-published the token.
    for (const svc of [a, b]) expect(await accepted(svc, token.secret), `${svc === a ? 'node-a' : 'node-b'} refuses the revoked token`).to.equal(false);
    const listed = await (await HealApi.signIn(b)).json<{ id: string }[]>('/api/tokens');
    expect(listed.map((t) => t.id)).to.not.include(token.id);
    expect(await raw.exists('exitpool:issue-35:fleet:tokens', 'exitpool:issue-35:fleet:bans', 'exitpool:issue-35:fleet:epoch')).to.equal(0);
    expect(await raw.keys('exitpool:issue-35:fleet:hop-keys:*'), 'no hop key published into the lost Redis').to.deep.equal([]);
    // Still serving: its own clients, with the operator's token.
    await viaSocks(b.socksPort, 'served-while-lost', TEST_PROXY_TOKEN);
    // A token cannot be issued while the nodes cannot share it.
    const refusedIssue = await (await HealApi.signIn(b)).raw('/api/tokens', { method: 'POST', body: { name: 'while-lost', scope: 'proxy' } });
    expect(refusedIssue.status).to.equal(503);

    // Recovery (docs/operations.md): one node restarted with FLEET_RESEED naming the lost epoch.
    expect(await a.stop()).to.equal(0);
    nodes.delete('node-a');
    a = await start('node-a', { FLEET_RESEED: epoch });
    nodes.set('node-a', a);
    await a.waitReady(SIZE, SUITE_READY_TIMEOUT_MS);
    await reasonSeen(a, 'fleet_reseeded');
    await reasonSeen(b, 'fleet_rejoined');
    for (const svc of [a, b]) expect(await accepted(svc, token.secret)).to.equal(false);
    const fresh = await issue(b, 'after-the-reseed');
    await pollUntil('node-a takes a token issued on node-b', () => accepted(a, fresh.secret), TOKEN_EVERYWHERE_WITHIN_MS * 2, { until: (ok) => ok, intervalMs: 20 });
    // Forwarding works again between them: node-a's session through node-b.
    const ipA = await viaSocks(a.socksPort, 'owned-by-a-after', fresh.secret);
    await pollUntil('node-b forwards to node-a again', () => viaSocks(b.socksPort, 'owned-by-a-after', fresh.secret), 4 * RENEWAL_MS, { until: (ip) => ip === ipA });
  });
});
