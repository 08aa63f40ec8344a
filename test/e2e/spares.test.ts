/**
 * A fresh exit on every rotation of a busy pool (issue 32), end to end on the private network
 * (8 exits in 7 /24s): every instance of the pool carries sessions, one session is rotated 24
 * times in a row, and each rotation reaches an exit outside the /24s of its last five while every
 * other session keeps its exit throughout. Before spares, a pool of 6 with one session per
 * instance answered 11 of 24 such rotations with `new_exit: false`.
 */
import { expect } from 'chai';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { SessionRotateResult } from '../../shared/api/views.js';
import { addressBlock } from '../../supervisor/exits/exit-relay.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { startService, TEST_PROXY_TOKEN } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

const READY_TIMEOUT_MS = 120_000;
const ROTATIONS = 24;
const EXIT_HISTORY = 5;
/** Every this many rotations, each other session also sends a request, to see its exit with its own eyes. */
const RESIDENT_CHECK_EVERY = 6;

interface BusyPoolCase {
  name: string;
  env: Record<string, string | undefined>;
  poolSize: number;
  spares: number;
  /** Sessions placed on each instance of the pool before the rotations. */
  perInstance: number;
}

const CASES: BusyPoolCase[] = [
  // The pool: 6 instances, one session each, and one spare.
  { name: 'a pool of 6 with one session per instance and WARM_SPARES=1', env: { POOL_SIZE: '6', WARM_SPARES: '1' }, poolSize: 6, spares: 1, perInstance: 1 },
  // The default number of spares (the fixture's WARM_SPARES=0 removed) on a pool of 4: 6 instances
  // in 6 of the 7 /24s, so the rotator's history often leaves only the seventh: a spare is given it.
  { name: 'a pool of 4 with two sessions per instance and the default WARM_SPARES', env: { POOL_SIZE: '4', WARM_SPARES: undefined }, poolSize: 4, spares: 2, perInstance: 2 },
];

describe('spares: a fresh exit on every rotation of a busy pool (private network)', function () {
  this.timeout(600_000);

  for (const c of CASES) {
    it(`${c.name}: 24 rotations of one session each leave the /24s of its last five; no other session's exit changes`, async () => {
      const svc = await startService(c.env as Record<string, string>);
      try {
        await svc.waitReady(c.poolSize, READY_TIMEOUT_MS);
        const api = await HealApi.signIn(svc);
        const pool = await pollUntil('the spares warm', () => api.pool(), READY_TIMEOUT_MS, { until: (p) => p.spares.warm === c.spares && p.routable === c.poolSize });
        expect(pool).to.include({ size: c.poolSize });
        expect(pool.config).to.include({ pool_size: c.poolSize, warm_spares: c.spares });
        const spareIds = (await api.instances()).filter((i) => i.spare).map((i) => i.id);
        expect(spareIds).to.have.lengthOf(c.spares);

        // Busy: every instance of the pool carries sessions (new sessions never land on a spare).
        const residents = new Map<string, string>();
        for (let i = 0; i < c.poolSize * c.perInstance; i++) residents.set(`resident-${i}`, await exitIpOf(svc, `resident-${i}`));
        const rotator = 'rotator';
        const history = [await exitIpOf(svc, rotator)];
        const instances = await api.instances();
        for (const i of instances.filter((x) => !x.spare)) expect(i.sessions, `instance ${i.id} carries sessions`).to.be.at.least(c.perInstance);
        for (const i of instances.filter((x) => x.spare)) expect(i.sessions, `spare ${i.id} carries none`).to.equal(0);
        const placed = new Map((await api.sessions()).map((s) => [s.key, `${s.instance} ${s.exit_ip}`]));

        const othersAsPlaced = async (when: string): Promise<void> => {
          for (const s of await api.sessions()) {
            if (s.key === rotator) continue;
            expect(`${s.instance} ${s.exit_ip}`, `${when}: ${s.key}`).to.equal(placed.get(s.key));
          }
        };
        const othersSeeTheirExit = async (when: string): Promise<void> => {
          for (const [key, ip] of residents) expect(await exitIpOf(svc, key), `${when}: ${key} through its own exit`).to.equal(ip);
        };

        for (let i = 0; i < ROTATIONS; i++) {
          const r = await api.json<SessionRotateResult>(`/api/sessions/${rotator}/rotate`, { method: 'POST', bearer: TEST_PROXY_TOKEN });
          if (!r.new_exit) {
            // What the pool did just before, for whoever reads the failure.
            const recent = (await api.events(30)).map((e) => `${e.type} #${String(e.instance)}: ${e.message}`).join('\n');
            expect.fail(`rotation ${i}: ${r.exit_note}\n${recent}`);
          }
          const ip = await exitIpOf(svc, rotator);
          const recent = history.slice(-EXIT_HISTORY);
          expect(recent.map(addressBlock), `rotation ${i}: ${ip} after ${recent.join(' ')}`).to.not.include(addressBlock(ip));
          history.push(ip);
          await othersAsPlaced(`after rotation ${i}`);
          if ((i + 1) % RESIDENT_CHECK_EVERY === 0) await othersSeeTheirExit(`after rotation ${i}`);
        }
        expect((await api.session(rotator)).recent_exits).to.deep.equal(history.slice(-EXIT_HISTORY - 1, -1));

        // The spares did the work, and no session but the rotator ever stood on one.
        const events = await api.events(1000);
        const rotations = events.filter((e: AuditEvent) => e.type === 'rotate' && e.session === rotator);
        const supply = rotations.map((e) => e.details.supply).filter((x) => typeof x === 'string');
        expect(supply, JSON.stringify(supply)).to.include.oneOf(['spare', 'spare_assigned']);
        expect(supply).to.not.include('none');
        for (const s of await api.sessions()) if (s.key !== rotator) expect(spareIds, s.key).to.not.include(s.instance);
        const after = await api.pool();
        expect(after).to.include({ size: c.poolSize, routable: c.poolSize });
        expect(after.spares.size).to.equal(c.spares);
      } catch (error) {
        await svc.stop();
        throw error;
      }
      expect(await svc.stop(), 'a clean shutdown').to.equal(0);
    });
  }
});
