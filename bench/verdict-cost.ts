import { AuditLog } from '../supervisor/audit/audit-log.js';
import { ExitAssignments } from '../supervisor/exits/exit-assignments.js';
import { addressBlock, asPublished, type ExitRelay } from '../supervisor/exits/exit-relay.js';
import { partyResolver } from '../supervisor/verdicts/parties.js';
import type { CloseRecord, ReachedHost } from '../shared/ipc/protocol.js';
import { fakeExit, fakePool } from '../test/support/fakes/pool-parts.js';
import { quietLogger } from '../test/support/fakes/quiet-logger.js';
import type { BenchSection } from './report.js';

/** The supervisor's whole budget per proxied request (DESIGN, round 2). */
const SUPERVISOR_PER_REQUEST_BUDGET_US = 50;

export interface VerdictCostOptions {
  sessions: number;
  records: number;
  batch: number;
  rounds: number;
}

export const FULL_VERDICT_COST_OPTIONS: VerdictCostOptions = { sessions: 10_000, records: 400_000, batch: 256, rounds: 3 };

/**
 * What carrying each connection's host and credential to the supervisor costs it (issue 29):
 * the real Pool (ledger, verdicts with their visit log) over fake tors, fed accounting batches as a
 * proxy worker sends them, with the evidence (host, credential) and without it (an empty host: no
 * visit recorded), CPU time per record, best of `rounds`, in one process.
 */
export async function benchVerdictCost(o: VerdictCostOptions = FULL_VERDICT_COST_OPTIONS): Promise<BenchSection> {
  const catalog: ExitRelay[] = Array.from({ length: 8 }, (_, i) => {
    const address = `10.${i + 1}.0.1`;
    return asPublished({ fingerprint: ('ABCDEF01'[i] as string).repeat(40), nickname: `e${i}`, address, country: 'de', bandwidth: 1000, block: addressBlock(address), family: `F${i}` });
  });
  const exits = new ExitAssignments({ unit: 'subnet', banTtlMs: 3_600_000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: quietLogger(), random: () => 0 });
  exits.catalog.replace(catalog, 1);
  const { pool, instances } = fakePool({ POOL_SIZE: '4', MAX_SESSIONS: String(o.sessions * 2) }, { exits, partyOf: partyResolver(() => '') });
  for (const [id, i] of instances) {
    const next = exits.next(id, { fresh: false, why: 'bench' });
    if (next.ok) i.exitInfo = fakeExit(next.relay.address, { exitFingerprint: next.relay.fingerprint });
  }
  const keys = Array.from({ length: o.sessions }, (_, i) => `bench-${i}`);
  const routes = keys.map((key) => {
    const r = pool.route({ key, named: true, listener: 'socks' }, 1);
    if (!r.ok) throw new Error('not routed');
    return { key, session: r.session as number, instance: r.instance };
  });
  const record = (i: number, withEvidence: boolean): CloseRecord => {
    const r = routes[i % routes.length] as { key: string; session: number; instance: number };
    return {
      key: r.key,
      session: r.session,
      instance: r.instance,
      bytesUp: 100,
      bytesDown: 1000,
      ok: true,
      latencyMs: 5,
      endedAt: Date.now(),
      host: withEvidence ? `site-${i % 50}.example` : '',
      credential: withEvidence ? `token:t${i % 20}` : '',
    };
  };
  const measure = (withEvidence: boolean): number => {
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < o.rounds; round++) {
      const batches: { reached: ReachedHost[]; closes: CloseRecord[] }[] = [];
      for (let i = 0; i < o.records; i += o.batch) {
        const closes = Array.from({ length: Math.min(o.batch, o.records - i) }, (_, j) => record(i + j, withEvidence));
        // A proxy worker sends a connection's start (with evidence) as well as its end.
        const reached = withEvidence ? closes.map((c) => ({ key: c.key as string, instance: c.instance, host: c.host, credential: c.credential, at: c.endedAt })) : [];
        batches.push({ reached, closes });
      }
      const before = process.cpuUsage();
      for (const b of batches) {
        pool.recordReached(b.reached);
        pool.recordCloses(b.closes, 1);
      }
      const used = process.cpuUsage(before);
      best = Math.min(best, (used.user + used.system) / o.records);
    }
    return best;
  };
  measure(true); // warm up both paths
  measure(false);
  const without = measure(false);
  const withEvidence = measure(true);
  await pool.stop();
  const added = withEvidence - without;
  return {
    title: 'The evidence each connection carries (verdicts)',
    method: `The real Pool over fake tors (${o.sessions} sessions on 4 instances), fed ${o.records} connections in batches of ${o.batch} as a proxy worker sends them: with the evidence (a \`reached\` record as each starts and the close record's host and credential; the visit log records both) and without (close records with an empty host: nothing recorded). CPU time of the supervisor's process per connection, best of ${o.rounds}. The limit is the supervisor's whole budget per proxied request.`,
    figures: [
      { name: 'supervisor CPU per connection, without evidence', value: `${without.toFixed(2)} µs`, limit: '', withinLimit: null },
      { name: 'supervisor CPU per connection, with its start and its close carrying host and credential', value: `${withEvidence.toFixed(2)} µs`, limit: `≤ ${SUPERVISOR_PER_REQUEST_BUDGET_US} µs`, withinLimit: withEvidence <= SUPERVISOR_PER_REQUEST_BUDGET_US },
      { name: 'added by the evidence', value: `${added.toFixed(2)} µs`, limit: '', withinLimit: null },
    ],
  };
}
