import { expect } from 'chai';
import { AuditLog, auditClassOf } from '../../supervisor/audit/audit-log.js';
import type { AuditEvent } from '../../shared/api/audit-event.js';

describe('audit log', () => {
  it('returns events newest first with every field', () => {
    const log = new AuditLog(10);
    log.record({ type: 'resize', message: 'pool resized to 3', details: { from: 2, to: 3 } }, Date.UTC(2026, 0, 1));
    log.record({ type: 'rotate', message: 'instance 1 rotated', instance: 1 }, Date.UTC(2026, 0, 2));
    const [newest, oldest] = log.recent();
    expect(newest).to.deep.equal({
      id: 2,
      time: '2026-01-02T00:00:00.000Z',
      type: 'rotate',
      instance: 1,
      session: null,
      message: 'instance 1 rotated',
      details: {},
    });
    expect(oldest!.details).to.deep.equal({ from: 2, to: 3 });
  });

  it('is bounded: the oldest events fall out of the ring', () => {
    const log = new AuditLog(5);
    for (let i = 0; i < 12; i++) log.record({ type: 'assignment', message: `e${i}` });
    expect(log.size).to.equal(5);
    expect(log.recent(100).map((e) => e.message)).to.deep.equal(['e11', 'e10', 'e9', 'e8', 'e7']);
    expect(log.recent(2).map((e) => e.id)).to.deep.equal([12, 11]);
  });

  it('keeps security and operator events when session events churn: separate capacity per class', () => {
    const log = new AuditLog(5);
    log.record({ type: 'auth', message: 'signed in' });
    log.record({ type: 'quarantine', message: 'quarantined', instance: 1 });
    log.record({ type: 'instance', message: 'instance 1 restarted by an operator', instance: 1 });
    for (let i = 0; i < 1000; i++) {
      log.record({ type: 'rotate', message: `rotate ${i}`, session: 'k' });
      log.record({ type: 'instance', message: `failure reported ${i}`, instance: 0, session: 'k' });
      log.record({ type: 'assignment', message: `moved ${i}`, session: 'k' });
    }
    const all = log.recent(1000);
    expect(all.filter((e) => e.type === 'auth' || e.type === 'quarantine').map((e) => e.message)).to.deep.equal(['quarantined', 'signed in']);
    expect(all.filter((e) => e.session === 'k')).to.have.length(5);
    expect(log.size).to.equal(8);
    // One list, newest first across the classes.
    const ids = all.map((e) => e.id);
    expect(ids).to.deep.equal([...ids].sort((a, b) => b - a));
    expect(log.recent(2).map((e) => e.message)).to.deep.equal(['moved 999', 'failure reported 999']);
    expect(log.recent(10, ['auth', 'quarantine']).map((e) => e.message)).to.deep.equal(['quarantined', 'signed in']);
  });

  it('classes: session events are assignments, rotates and reports about a session', () => {
    expect(auditClassOf('assignment', null)).to.equal('session');
    expect(auditClassOf('rotate', 'k')).to.equal('session');
    expect(auditClassOf('instance', 'k')).to.equal('session');
    for (const t of ['auth', 'quarantine', 'remediation', 'restart', 'resize'] as const) expect(auditClassOf(t, null), t).to.equal('operator');
    expect(auditClassOf('instance', null)).to.equal('operator');
  });

  it('emits each event as it is recorded', () => {
    const log = new AuditLog(5);
    const seen: AuditEvent[] = [];
    log.on('event', (e: AuditEvent) => seen.push(e));
    log.record({ type: 'auth', message: 'token issued' });
    expect(seen).to.have.length(1);
    expect(seen[0]!.type).to.equal('auth');
  });
});
