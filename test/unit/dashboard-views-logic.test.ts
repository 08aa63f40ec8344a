import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import type { ExitsView, SessionView, StatsSample } from '../../shared/api/views.js';
import type { StateSnapshot } from '../../shared/ipc/protocol.js';
import { ApiError, ForbiddenError, UnauthorizedError, describeError, errorForStatus } from '../../dashboard/src/logic/api-errors.js';
import { exitDisplay, exitIpOrigin } from '../../dashboard/src/logic/exit-display.js';
import { exitHolder, fleetLine } from '../../dashboard/src/logic/exits.js';
import { extendHistory, historyColumns } from '../../dashboard/src/logic/history-series.js';
import { INSTANCE_ACTIONS, actionBlockedReason, actionPath, parsePoolSize } from '../../dashboard/src/logic/instance-actions.js';
import { filterSessions, filterSessionsByCountry, sessionCountries, sortSessions } from '../../dashboard/src/logic/session-filter.js';
import type { StreamSnapshot } from '../../dashboard/src/logic/snapshot.js';
import { CREDENTIAL_STORAGE_KEY, isLoginResult, msUntilExpiry, parseStoredCredential } from '../../dashboard/src/logic/stored-credential.js';
import { VIEWS, hashOf, viewFromHash } from '../../dashboard/src/logic/views.js';

function session(key: string, instance: number, over: Partial<SessionView> = {}): SessionView {
  return {
    key, instance, created_at: '2026-01-01T00:00:00.000Z', last_seen: '2026-01-01T00:00:00.000Z',
    requests: 0, failures: 0, bytes_up: 0, bytes_down: 0, active: 0, exit_ip: '', exit_country: '', recent_exits: [],
    params: { countries: [], lifetime_secs: null, mode: 'sticky' }, ...over,
  };
}

describe('dashboard view logic: sessions by country', () => {
  it('filters by where a session leaves from or what its username asked for', () => {
    const list = [
      session('a', 0, { exit_country: 'de' }),
      session('b', 1, { exit_country: 'nl', params: { countries: ['de', 'nl'], lifetime_secs: null, mode: 'sticky' } }),
      session('c', 2, { exit_country: '' }),
    ];
    expect(sessionCountries(list)).to.deep.equal(['de', 'nl']);
    expect(filterSessionsByCountry(list, 'de').map((s) => s.key)).to.deep.equal(['a', 'b']);
    expect(filterSessionsByCountry(list, 'nl').map((s) => s.key)).to.deep.equal(['b']);
    expect(filterSessionsByCountry(list, '')).to.have.length(3);
  });
});

describe('dashboard view logic', () => {
  it('restates the stream snapshot exactly as the service defines it', () => {
    // Compile-time: each shape is assignable to the other.
    const fromService = (s: StateSnapshot): StreamSnapshot => s;
    const toService = (s: StreamSnapshot): StateSnapshot => s;
    expect(fromService).to.be.a('function');
    expect(toService).to.be.a('function');
  });

  describe('errors', () => {
    it('signs out on 401 only: 403 is "not allowed"', () => {
      expect(errorForStatus(401, 'expired credential\n')).to.be.instanceOf(UnauthorizedError);
      const forbidden = errorForStatus(403, 'needs admin scope');
      expect(forbidden).to.be.instanceOf(ForbiddenError);
      expect(forbidden).to.not.be.instanceOf(UnauthorizedError);
      expect(describeError(forbidden)).to.equal('not allowed: needs admin scope');
      expect(describeError(errorForStatus(403, ''))).to.equal('not allowed');
      const conflict = errorForStatus(409, 'instance 2 is not bootstrapped\n');
      expect(conflict).to.be.instanceOf(ApiError);
      expect(conflict.status).to.equal(409);
      expect(describeError(conflict)).to.equal('409: instance 2 is not bootstrapped');
      expect(describeError(errorForStatus(500, ''))).to.equal('HTTP 500');
    });
  });

  describe('exits', () => {
    it('shows the current exit, the retired one during a rotation, or none', () => {
      const base = { exit_ip: '', exit_country: '', exit_nickname: '', exit_confirmed: false, retired_exit_ip: '' };
      expect(exitDisplay({ ...base, exit_ip: '127.0.0.11', exit_country: 'de', exit_confirmed: true })).to.deep.equal({
        kind: 'current', ip: '127.0.0.11', country: 'de', nickname: '', confirmed: true,
      });
      expect(exitDisplay({ ...base, retired_exit_ip: '127.0.0.12' })).to.deep.equal({ kind: 'retired', ip: '127.0.0.12' });
      expect(exitDisplay(base)).to.deep.equal({ kind: 'none' });
    });

    it('says how the exit IP is known: measured, listed, or only the published address', () => {
      const time = (iso: string): string => `T(${iso})`;
      expect(exitIpOrigin({ exit_ip_source: 'probe', exit_ip_measured_at: '2030-01-01T12:00:00.000Z' }, time)).to.equal('measured through the exit, T(2030-01-01T12:00:00.000Z) UTC');
      expect(exitIpOrigin({ exit_ip_source: 'exit_list', exit_ip_measured_at: '2030-01-01T11:00:00.000Z' }, time)).to.equal('the Tor exit list, T(2030-01-01T11:00:00.000Z) UTC');
      expect(exitIpOrigin({ exit_ip_source: 'published', exit_ip_measured_at: null }, time)).to.match(/publishes \(not measured\)/);
      expect(exitIpOrigin({ exit_ip_source: '', exit_ip_measured_at: null }, time)).to.equal('–');
    });
  });

  describe('instance actions and pool size', () => {
    it('names every instance action with its path; restart carries wipe', () => {
      expect(INSTANCE_ACTIONS.map((a) => a.name)).to.deep.equal(['rotate', 'restart', 'quarantine', 'release', 'drain']);
      expect(actionPath(2, 'rotate', true)).to.equal('/api/instances/2/rotate');
      expect(actionPath(2, 'restart', true)).to.equal('/api/instances/2/restart?wipe=true');
      expect(actionPath(2, 'restart', false)).to.equal('/api/instances/2/restart?wipe=false');
      expect(actionBlockedReason('rotate', { ready: false })).to.equal('not bootstrapped yet');
      expect(actionBlockedReason('rotate', { ready: true })).to.equal(null);
      expect(actionBlockedReason('restart', { ready: false })).to.equal(null);
    });

    it('accepts a pool size from 1 to the maximum only', () => {
      expect(parsePoolSize(' 4 ', 64)).to.deep.equal({ ok: true, size: 4 });
      expect(parsePoolSize('0', 64).ok).to.equal(false);
      expect(parsePoolSize('65', 64).ok).to.equal(false);
      expect(parsePoolSize('2.5', 64).ok).to.equal(false);
      expect(parsePoolSize('', 64).ok).to.equal(false);
      expect(parsePoolSize('-1', 64).ok).to.equal(false);
    });
  });

  describe('sessions', () => {
    const sessions = [session('alice', 0, { requests: 5 }), session('bob', 1, { bytes_down: 900 }), session('carol-2', 2, { last_seen: '2026-01-01T00:05:00.000Z' })];
    const exitOf = (id: number): string => `127.0.0.${11 + id}`;

    it('filters by key, exit or instance', () => {
      expect(filterSessions(sessions, '', exitOf)).to.equal(sessions);
      expect(filterSessions(sessions, 'ALI', exitOf).map((s) => s.key)).to.deep.equal(['alice']);
      expect(filterSessions(sessions, '127.0.0.12', exitOf).map((s) => s.key)).to.deep.equal(['bob']);
      expect(filterSessions(sessions, '#2', exitOf).map((s) => s.key)).to.deep.equal(['carol-2']);
      expect(filterSessions(sessions, '1', () => '').map((s) => s.key)).to.deep.equal(['bob']);
    });

    it('sorts by the chosen column without losing or duplicating rows (property)', () => {
      expect(sortSessions(sessions, 'last_seen')[0]!.key).to.equal('carol-2');
      expect(sortSessions(sessions, 'requests')[0]!.key).to.equal('alice');
      expect(sortSessions(sessions, 'bytes')[0]!.key).to.equal('bob');
      fc.assert(
        fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 6 })), fc.constantFrom('key', 'instance', 'last_seen', 'requests', 'bytes' as const), (keys, by) => {
          const list = keys.map((k, i) => session(k, i % 3, { requests: i }));
          const sorted = sortSessions(list, by);
          expect([...sorted.map((s) => s.key)].sort()).to.deep.equal([...keys].sort());
        }),
      );
    });
  });

  describe('sign-in credential', () => {
    const now = 1_700_000_000_000;
    it('reads back only a well-formed, unexpired credential', () => {
      const good = JSON.stringify({ token: 'jwt', expires: now / 1000 + 60, user: 'admin' });
      expect(parseStoredCredential(good, now)).to.deep.equal({ token: 'jwt', expires: now / 1000 + 60, user: 'admin' });
      expect(parseStoredCredential(JSON.stringify({ token: 'jwt', expires: now / 1000, user: 'admin' }), now)).to.equal(null);
      expect(parseStoredCredential(null, now)).to.equal(null);
      expect(parseStoredCredential('{', now)).to.equal(null);
      expect(parseStoredCredential('"jwt"', now)).to.equal(null);
      expect(parseStoredCredential(JSON.stringify({ token: '', expires: now, user: 'a' }), now)).to.equal(null);
      expect(CREDENTIAL_STORAGE_KEY).to.be.a('string');
    });

    it('recognises a login result and counts down to its expiry', () => {
      expect(isLoginResult({ token: 't', expires: 1, user: 'u' })).to.equal(true);
      expect(isLoginResult({ token: 't', user: 'u' })).to.equal(false);
      expect(msUntilExpiry({ token: 't', expires: now / 1000 + 5, user: 'u' }, now)).to.equal(5000);
      expect(msUntilExpiry({ token: 't', expires: now / 1000 - 5, user: 'u' }, now)).to.equal(0);
    });
  });

  it('routes views by the URL fragment, defaulting to the overview', () => {
    for (const v of VIEWS) expect(viewFromHash(hashOf(v))).to.equal(v);
    expect(viewFromHash('')).to.equal('overview');
    expect(viewFromHash('#/nope')).to.equal('overview');
    expect(viewFromHash('#events')).to.equal('events');
  });

  describe('timeline series', () => {
    const s = (sec: number, over: Partial<StatsSample> = {}): StatsSample => ({
      time: new Date(Date.UTC(2026, 0, 1, 0, 0, sec)).toISOString(), interval_secs: 1, requests: 0, failures: 0,
      bytes_up: 0, bytes_down: 0, latency_ms: { p50: 1, p90: 2, p99: 3 }, sessions: 0, routable: 2, ...over,
    });

    it('turns samples into sorted per-second columns for uPlot', () => {
      const cols = historyColumns([s(2, { requests: 4 }), s(1, { requests: 2 }), s(2, { requests: 99 }), s(3, { interval_secs: 60, requests: 120, bytes_down: 600 })]);
      expect(cols.time).to.deep.equal([1, 2, 3].map((x) => Date.UTC(2026, 0, 1, 0, 0, x) / 1000));
      expect(cols.requests).to.deep.equal([2, 4, 2]);
      expect(cols.bytesDown).to.deep.equal([0, 0, 10]);
      expect(cols.p99).to.deep.equal([3, 3, 3]);
      expect(cols.routable).to.deep.equal([2, 2, 2]);
      for (const c of Object.values(cols)) expect(c).to.have.length(3);
    });

    it('extends a fetched fine series with live samples, bounded', () => {
      let h: readonly StatsSample[] = [s(1), s(2)];
      h = extendHistory(h, s(2), 3);
      h = extendHistory(h, s(3), 3);
      h = extendHistory(h, s(4), 3);
      h = extendHistory(h, null, 3);
      expect(h.map((x) => new Date(x.time).getUTCSeconds())).to.deep.equal([2, 3, 4]);
    });
  });
});

describe('dashboard logic: the exit supply on a node of a fleet', () => {
  const view = (fleet: ExitsView['fleet'], exits: ExitsView['exits'] = []): ExitsView => ({
    distinct_by: 'relay',
    assigning: true,
    updated_at: null,
    eligible: 0,
    capacity: 0,
    in_use: 0,
    shortages: [],
    countries: [],
    exits,
    bans: [],
    down: [],
    egress: { probing: true, exit_list: false, probes: 0, failed: 0, probes_last_hour: 0, mean_ms: 0, max_ms: 0 },
    fleet,
  });
  const exit = (instances: number[], held_by: string | null): ExitsView['exits'][number] => ({
    fingerprint: 'A'.repeat(40),
    nickname: 'x',
    address: '10.0.0.1',
    country: 'de',
    bandwidth: 1,
    block: '10.0.0.0/24',
    family: 'A'.repeat(40),
    published_address: '10.0.0.1',
    address_source: 'published',
    address_measured_at: null,
    seen_addresses: [],
    instances,
    banned: null,
    down: null,
    held_by,
  });

  it('names this node and the others, and says nothing on a node of its own', () => {
    expect(fleetLine(view(null))).to.equal(null);
    expect(fleetLine(view({ node: 'a', nodes: ['a'] }))).to.match(/^Node a of 1 in the fleet;/);
    expect(fleetLine(view({ node: 'b', nodes: ['a', 'b', 'c'] }))).to.match(/^Node b of 3 in the fleet \(also a, c\);/);
  });

  it('shows an exit’s instances here, else the node holding it, else a dash', () => {
    expect(exitHolder(exit([0, 2], null))).to.equal('0, 2');
    expect(exitHolder(exit([], 'node-b'))).to.equal('node node-b');
    expect(exitHolder(exit([], null))).to.equal('—');
  });
});
