import { expect } from 'chai';
import type { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { BUSY_REASSIGNMENT_INTERVAL_MS, CountryPlacement } from '../../supervisor/pool/country-placement.js';
import { InstanceRegistry } from '../../supervisor/pool/instance-registry.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { loadConfig } from '../../shared/config/index.js';
import { SessionTable } from '../../supervisor/sessions/session-table.js';
import { FakeHealth, FakeInstance, fakeExit } from '../support/fakes/pool-parts.js';

/** Three ready instances in de, nl, se; giving one an exit moves it to the country asked for. */
function rig(eligible = true): { placement: CountryPlacement; registry: InstanceRegistry; rotations: number[]; sessions: SessionTable; clock: { t: number }; slept: number[] } {
  const clock = { t: 1_000_000 };
  const exits = { hasEligibleIn: () => eligible, assignment: () => undefined } as unknown as ExitAssignments;
  const registry = new InstanceRegistry({ config: loadConfig({ POOL_SIZE: '3', MAX_SESSIONS: '100' }), audit: new AuditLog(), now: () => clock.t, exits, waitForListeners: false });
  ['de', 'nl', 'se'].forEach((country, id) => {
    const instance = new FakeInstance(id);
    instance.setReady(true);
    instance.exitInfo = fakeExit(`10.0.${id}.1`, { exitCountry: country });
    const health = new FakeHealth();
    health.state = 'healthy';
    registry.add({ instance, health, draining: false, retiring: false, spare: false, requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, latencyMs: 0 });
  });
  registry.maybeServe();
  const rotations: number[] = [];
  const slept: number[] = [];
  const placement = new CountryPlacement(
    registry,
    {
      rotateInstance: async (e, _by, rotation) => {
        rotations.push(e.instance.id);
        (e.instance as FakeInstance).exitInfo = fakeExit('10.9.9.9', { exitCountry: rotation?.countries?.[0] as string });
        return { exit: 'F'.repeat(40), shortage: '' };
      },
      waitRotationEnd: () => Promise.resolve(),
    },
    () => clock.t,
    // Sleeps are recorded and end at once; the test moves the clock itself.
    async (ms) => {
      slept.push(ms);
    },
  );
  return { placement, registry, rotations, sessions: registry.sessions, clock, slept };
}

describe('placement by country', () => {
  it('gives the idle instance an exit there, once for concurrent first requests', async () => {
    const { placement, rotations, sessions } = rig();
    sessions.route('on-0', { routable: [0], lastResort: null }, 0);
    sessions.route('on-1', { routable: [1], lastResort: null }, 0);
    const answers = await Promise.all([placement.ensure(['jp'], 'a'), placement.ensure(['jp'], 'b')]);
    expect(answers).to.deep.equal([null, null]);
    expect(rotations).to.deep.equal([2]);
    expect(placement.served(['jp'])).to.equal(true);
  });

  it('takes busy instances one per BUSY_REASSIGNMENT_INTERVAL_MS, queueing within the bound and refusing beyond it; a country without exits at once', async () => {
    const { placement, rotations, sessions, clock, slept } = rig();
    for (const id of [0, 1, 2]) sessions.route(`on-${id}`, { routable: [id], lastResort: null }, 0);
    expect(await placement.ensure(['jp'], 'a')).to.equal(null);
    expect(slept).to.deep.equal([]);
    expect(await placement.ensure(['ch'], 'b')).to.equal(null);
    expect(slept, 'the second waited for its turn').to.deep.equal([BUSY_REASSIGNMENT_INTERVAL_MS]);
    // The clock stands still: each next one's turn is two seconds later, until it would come too late.
    const queued: (string | undefined)[] = [];
    for (const c of ['fi', 'no', 'dk', 'is', 'ee', 'lv']) queued.push((await placement.ensure([c], 'c'))?.refusal);
    expect(queued).to.deep.equal([undefined, undefined, undefined, undefined, undefined, 'country_wait_timeout']);
    clock.t += 60_000;
    expect(await placement.ensure(['gr'], 'd')).to.equal(null);
    expect(rotations).to.have.length(8);
    const none = rig(false);
    expect((await none.placement.ensure(['fr'], 'c'))?.refusal).to.equal('no_exit_in_country');
    expect(none.rotations).to.deep.equal([]);
  });

  it('gives concurrent requests for different countries different instances', async () => {
    const { placement, rotations } = rig();
    expect(await Promise.all([placement.ensure(['jp'], 'a'), placement.ensure(['ch'], 'b')])).to.deep.equal([null, null]);
    expect(new Set(rotations).size).to.equal(2);
    expect(placement.served(['jp']) && placement.served(['ch'])).to.equal(true);
  });

  it('fits a session only to instances in its countries, and rotates a rotating one to another', () => {
    const { placement, registry } = rig();
    const s = { key: 'k', id: 1, instance: 0, createdAt: 0, lastSeen: 0, requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, active: 0, recentExits: [], domains: [], params: { countries: ['de', 'se'], mode: 'rotating' as const } };
    expect([0, 1, 2].filter((id) => registry.fits(s, id))).to.deep.equal([0, 2]);
    for (let i = 0; i < 10; i++) expect(placement.nextRotating(s, [0, 1, 2])).to.equal(2);
  });
});
