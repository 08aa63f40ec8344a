import { expect } from 'chai';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { EXIT_DOWN_TIMES, ExitDowns } from '../../supervisor/exits/exit-downs.js';
import { addressBlock, asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { exitsViewOf } from '../../supervisor/exits/exits-view.js';
import { logger } from '../../shared/logger.js';

/**
 * Exits found dead by the pool's own evidence (supervisor/exits/exit-downs.ts): a short hold of
 * their own, then probation with a doubling hold for a relay that keeps dying.
 */

const fp = (c: string): string => c.repeat(40).toUpperCase();
const { holdMs, holdMaxMs, probationMs } = EXIT_DOWN_TIMES;

function relay(c: string, address: string): ExitRelay {
  return asPublished({ fingerprint: fp(c), nickname: `n${c}`, address, country: 'de', bandwidth: 1000, block: addressBlock(address), family: fp(c) });
}

function assignments(exits: ExitRelay[], clock: { t: number }, audit = new AuditLog()): ExitAssignments {
  const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 10 * holdMs, exitNodes: [], strictNodes: false, audit, log: logger(), now: () => clock.t, random: () => 0 });
  a.catalog.replace(exits, 1);
  return a;
}

describe('exits that die: the down state and its probation', () => {
  it('holds a dead relay for EXIT_DOWN_HOLD_MS, then lets it back on probation, then forgets it', () => {
    const downs = new ExitDowns();
    const r = relay('a', '10.0.0.1');
    const { down, fresh } = downs.markDown(r, 3, ['extend_failed via $M'], 0);
    expect(fresh).to.equal(true);
    expect(down).to.deep.include({ strikes: 1, since: 0, until: holdMs, probationUntil: holdMs + probationMs, instance: 3 });
    expect(downs.stateOf(r.fingerprint, holdMs - 1)).to.equal('down');
    expect(downs.stateOf(r.fingerprint, holdMs)).to.equal('probation');
    expect(downs.isDown(r.fingerprint, holdMs)).to.equal(false);
    expect(downs.stateOf(r.fingerprint, holdMs + probationMs)).to.equal(undefined);
    expect(downs.list(holdMs + probationMs)).to.deep.equal([]);
  });

  it('doubles the hold of a relay that dies again within its probation, up to EXIT_DOWN_HOLD_MAX_MS; a quiet probation starts it over', () => {
    const downs = new ExitDowns();
    const r = relay('a', '10.0.0.1');
    let t = 0;
    const holds: number[] = [];
    for (let i = 0; i < 8; i++) {
      const { down } = downs.markDown(r, 0, [], t);
      holds.push(down.until - down.since);
      t = down.until + 1; // back, and dead again at once
    }
    expect(holds.slice(0, 3)).to.deep.equal([holdMs, 2 * holdMs, 4 * holdMs]);
    expect(Math.max(...holds)).to.equal(holdMaxMs);
    const last = downs.get(r.fingerprint, t) as { probationUntil: number };
    const after = downs.markDown(r, 0, [], last.probationUntil);
    expect(after.down.strikes).to.equal(1);
  });

  it('another instance finding a relay that is already down changes nothing', () => {
    const downs = new ExitDowns();
    const r = relay('a', '10.0.0.1');
    const first = downs.markDown(r, 0, ['x'], 0);
    const second = downs.markDown(r, 1, ['y'], 10);
    expect(second.fresh).to.equal(false);
    expect(second.down).to.equal(first.down);
    expect(downs.found, 'one death, found twice').to.equal(1);
  });

  it('counts the relays down and on probation, and every death found (the metrics)', () => {
    const downs = new ExitDowns();
    const [a, b] = [relay('a', '10.0.0.1'), relay('b', '10.1.0.1')];
    downs.markDown(a, 0, [], 0);
    downs.markDown(b, 1, [], holdMs / 2);
    expect(downs.counts(holdMs / 2)).to.deep.equal({ down: 2, probation: 0 });
    expect(downs.counts(holdMs)).to.deep.equal({ down: 1, probation: 1 });
    downs.markDown(a, 0, [], holdMs + 1);
    expect(downs.counts(holdMs + 1)).to.deep.equal({ down: 2, probation: 0 });
    expect(downs.found, 'a relay dead again within its probation counts again').to.equal(3);
    expect(downs.counts(10 * holdMaxMs)).to.deep.equal({ down: 0, probation: 0 });
  });

  it('assigns a down exit to no instance, says it is down in the API and the audit, and takes it back after the hold', () => {
    const clock = { t: 0 };
    const audit = new AuditLog();
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')], clock, audit);
    const first = a.next(0, { fresh: false, why: 'bootstrap' });
    expect(first.ok && first.relay.fingerprint).to.equal(fp('a'));
    a.next(1, { fresh: false, why: 'bootstrap' });
    const marked = a.markDown(0, fp('a'), ['extend_failed via $M1 (DESTROYED/DESTROYED)']);
    expect(marked?.instances).to.deep.equal([0]);
    expect(a.isDown(fp('a'))).to.equal(true);
    // Not a ban: the bans stay empty.
    expect(a.bans.list(clock.t)).to.deep.equal([]);
    // Never chosen while down, for any instance, even in a shortage.
    for (const id of [0, 2, 3]) {
      const n = a.next(id, { fresh: id === 0, why: 'exit_down' });
      expect(n.ok && n.relay.fingerprint, `instance ${id}`).to.equal(fp('b'));
    }
    for (const id of [2, 3]) a.release(id);
    const view = exitsViewOf(a, [0, 1], clock.t);
    expect(view.eligible).to.equal(1);
    expect(view.down.map((d) => [d.fingerprint, d.state, d.strikes, d.instance])).to.deep.equal([[fp('a'), 'down', 1, 0]]);
    expect(view.exits.find((e) => e.fingerprint === fp('a'))?.down?.state).to.equal('down');
    expect(view.exits.find((e) => e.fingerprint === fp('b'))?.down).to.equal(null);
    expect(view.countries.find((c) => c.country === 'de')?.eligible).to.equal(1);
    expect(a.assignment(0)?.down).to.equal(null); // instance 0 is on b now
    const event = audit.recent(10).find((e) => e.details.reason === 'exit_down');
    expect(event?.type).to.equal('exit');
    expect(event?.details).to.deep.include({ fingerprint: fp('a'), strikes: 1 });
    // Back after the hold, on probation: eligible, and shown as such.
    clock.t = holdMs;
    expect(a.isDown(fp('a'))).to.equal(false);
    expect(exitsViewOf(a, [0, 1], clock.t).down.map((d) => d.state)).to.deep.equal(['probation']);
    const back = a.next(1, { fresh: true, why: 'api' });
    expect(back.ok && back.relay.fingerprint).to.equal(fp('a'));
    expect(a.assignment(1)?.down?.state).to.equal('probation');
  });

  it('names every instance assigned the dead exit, and ignores a relay it does not know', () => {
    const clock = { t: 0 };
    const a = assignments([relay('a', '10.0.0.1')], clock);
    a.next(0, { fresh: false, why: 'bootstrap' });
    a.next(1, { fresh: false, why: 'bootstrap' }); // a shortage: both on a
    expect(a.markDown(1, fp('a'), [])?.instances).to.deep.equal([0, 1]);
    expect(a.markDown(0, fp('z'), [])).to.equal(undefined);
  });
});
