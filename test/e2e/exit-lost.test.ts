/**
 * An assigned exit that stops working while instances are pinned to it (issue 17: "replaces an
 * assigned exit that … stops working without leaving the instance stuck"). Killing a relay
 * harms the network, so this test brings a private network of its own.
 */
import { expect } from 'chai';
import { startTestnet, type Testnet } from '../../internal/testnet/index.js';
import type { ExitsView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { startService, SUITE_READY_TIMEOUT_MS, type RunningService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

/** Tor has to notice the dead relay, the pool to score the failures and move on: minutes at most. */
const RECOVERY_TIMEOUT_MS = 240_000;

describe('an assigned exit that dies (a private network of its own)', function () {
  this.timeout(900_000);
  let net: Testnet | undefined;
  let svc: RunningService | undefined;

  after(async () => {
    await svc?.stop();
    await net?.stop();
  });

  it('gets the instance another exit, bans the dead one, and serves the session through a live exit', async () => {
    net = await startTestnet();
    await net.waitUntilUsable();
    svc = await startService({ POOL_SIZE: '2' }, { testnet: net });
    await svc.waitReady(2, SUITE_READY_TIMEOUT_MS);
    const api = await HealApi.signIn(svc);
    const key = 'on-a-dying-exit';
    const ip = await exitIpOf(svc, key);
    const instance = (await api.session(key)).instance;
    const fingerprint = (await api.instance(instance)).assigned_exit?.fingerprint ?? '';
    const relay = net.nodes.find((n) => n.fingerprint === fingerprint);
    expect(relay, `the assigned exit ${fingerprint} is a relay of this network`).to.not.equal(undefined);
    // A relay of this test's own network, started by it: ended by its PID.
    process.kill(relay?.pid as number, 'SIGKILL');
    const running = svc;
    const served = await pollUntil('the session served through a live exit', () => fetchThroughSession(running, key), RECOVERY_TIMEOUT_MS, {
      until: (f) => f.kind === 'ip' && f.ip !== ip,
    });
    expect(served.kind === 'ip' && served.ip !== ip).to.equal(true);
    // The instance is not left pinned to the dead relay: it serves again on another exit.
    await pollUntil('the instance on another exit', () => api.instance(instance), RECOVERY_TIMEOUT_MS, {
      until: (v) => v.assigned_exit !== null && v.assigned_exit.fingerprint !== fingerprint && ['healthy', 'degraded', 'probation'].includes(v.health.state),
    });
    // And no instance is given the dead relay again: it is banned, or gone from the catalog.
    const exits = await api.json<ExitsView>('/api/exits');
    const banned = exits.bans.some((b) => b.fingerprint === fingerprint);
    const listed = exits.exits.some((e) => e.fingerprint === fingerprint);
    expect(banned || !listed, 'the dead exit banned or gone').to.equal(true);
    for (const i of await api.instances()) expect(i.assigned_exit?.fingerprint, `instance ${i.id}`).to.not.equal(fingerprint);
    const events = await api.events(300);
    expect(events.some((e) => e.type === 'exit' && e.details.fingerprint === fingerprint), 'the audit names the dead exit').to.equal(true);
  });
});
