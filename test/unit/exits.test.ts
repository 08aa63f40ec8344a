import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { parseConsensusEntries, parseFamilyDeclaration } from '../../supervisor/exits/consensus-entries.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { AssignmentTable } from '../../supervisor/exits/assignment-table.js';
import { ExitBans } from '../../supervisor/exits/exit-bans.js';
import { ExitSanctions } from '../../supervisor/exits/exit-sanctions.js';
import { buildExits, ExitCatalog, FAMILY_REREAD_MS, familiesOf } from '../../supervisor/exits/exit-catalog.js';
import { ControlCommandError } from '../../supervisor/tor/errors.js';
import { chooseExit } from '../../supervisor/exits/exit-choice.js';
import { addressBlock, asPublished, distinctKeys, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { exitsViewOf, liftBan } from '../../supervisor/exits/exits-view.js';
import { matchesNodeList } from '../../supervisor/exits/node-selection.js';
import { logger } from '../../shared/logger.js';
import { isFreshExit, rankByFreshness, rememberExit } from '../../supervisor/pool/exit-freshness.js';
import type { ExitState } from '../../supervisor/pool/pool-instance.js';

const fp = (c: string): string => c.repeat(40).toUpperCase();
const identity = (hex: string): string => Buffer.from(hex, 'hex').toString('base64').replace(/=+$/, '');

function nsEntry(nick: string, hex: string, address: string, flags: string, bandwidth = 1000): string {
  return `r ${nick} ${identity(hex)} ge3oVQks6xT1oVCYixQ9wofjjhA 2038-01-01 00:00:00 ${address} 9001 0\ns ${flags}\nw Bandwidth=${bandwidth}\n`;
}

function relay(c: string, address: string, over: Partial<ExitRelay> = {}): ExitRelay {
  return { ...asPublished({ fingerprint: fp(c), nickname: `n${c}`, address, country: 'de', bandwidth: 1000, block: addressBlock(address), family: fp(c) }), ...over };
}

/** The pool's answer to exit-gone (InstanceLifecycle.moveToNewExits): a fresh exit for each instance, at once. Returns every exit-gone heard. */
function answerExitGone(a: ExitAssignments): number[][] {
  const gone: number[][] = [];
  a.on('exit-gone', (ids) => {
    gone.push(ids);
    for (const id of ids) a.next(id, { fresh: true, why: 'exit_gone' });
  });
  return gone;
}

describe('exit catalog: parsing the consensus and microdescriptors', () => {
  it('reads every entry of ns/all with address, flags and weight, skipping a malformed one', () => {
    const text =
      nsEntry('exitA', fp('a'), '127.20.0.1', 'Exit Fast Running Stable Valid', 2000) +
      'r broken line\ns Exit\n' +
      nsEntry('middle', fp('b'), '127.0.0.2', 'Fast Guard Running Valid');
    const entries = parseConsensusEntries(text);
    expect(entries.map((e) => [e.nickname, e.fingerprint, e.address, e.bandwidth])).to.deep.equal([
      ['exitA', fp('a'), '127.20.0.1', 2000],
      ['middle', fp('b'), '127.0.0.2', 1000],
    ]);
  });

  it('never throws on arbitrary text, and finds every well-formed entry among garbage (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.array(fc.tuple(fc.stringMatching(/^[A-Za-z0-9]{1,19}$/), fc.stringMatching(/^[0-9A-F]{40}$/)), { maxLength: 5 }), (garbage, relays) => {
        const text = relays.map(([nick, hex]) => nsEntry(nick, hex, '127.20.0.1', 'Exit Running Valid')).join(garbage.replace(/(^|\n)r /g, '$1x ') + '\n');
        const entries = parseConsensusEntries(text);
        return entries.length === relays.length && entries.every((e, i) => e.fingerprint === relays[i]?.[1]);
      }),
    );
    fc.assert(fc.property(fc.string(), (text) => Array.isArray(parseConsensusEntries(text))));
  });

  it('reads family lines (fingerprints only) and family ids from a microdescriptor', () => {
    const md = `onion-key\nfamily $${fp('a')} $${fp('b').toLowerCase()}=nick somenick\nfamily-ids ed25519:abc\np accept 1-65535\n`;
    expect(parseFamilyDeclaration(md)).to.deep.equal({ members: [fp('a'), fp('b')], ids: ['ed25519:abc'] });
    fc.assert(fc.property(fc.string(), (text) => Array.isArray(parseFamilyDeclaration(text).members)));
  });

  it('makes relays one family only when each declares the other, or they share a family id', () => {
    const decl = new Map([
      [fp('a'), { members: [fp('a'), fp('b')], ids: [] }],
      [fp('b'), { members: [fp('a'), fp('b')], ids: [] }],
      [fp('c'), { members: [fp('a')], ids: [] }], // one-sided claim
      [fp('d'), { members: [], ids: ['x'] }],
      [fp('e'), { members: [], ids: ['x'] }],
    ]);
    const fam = familiesOf([fp('a'), fp('b'), fp('c'), fp('d'), fp('e')], decl);
    expect(fam.get(fp('b'))).to.equal(fp('a'));
    expect(fam.get(fp('c'))).to.equal(fp('c'));
    expect(fam.get(fp('e'))).to.equal(fp('d'));
  });

  it('keeps only usable exits (Exit, Running, Valid, not BadExit), with /24 blocks and countries', () => {
    const entries = parseConsensusEntries(
      nsEntry('good', fp('a'), '127.20.0.1', 'Exit Running Valid') +
        nsEntry('bad', fp('b'), '127.21.0.1', 'BadExit Exit Running Valid') +
        nsEntry('down', fp('c'), '127.22.0.1', 'Exit Valid') +
        nsEntry('v6', fp('d'), '2001:db8:1:2::5', 'Exit Running Valid', 0),
    );
    const exits = buildExits(entries, new Map(), new Map([['127.20.0.1', 'de']]));
    expect(exits.map((e) => [e.nickname, e.block, e.country, e.bandwidth])).to.deep.equal([
      ['good', '127.20.0.0/24', 'de', 1000],
      ['v6', '2001:db8:1::/48', '', 1],
    ]);
  });

  it('refreshes through GETINFO, fetching microdescriptors and countries only for relays new to it', async () => {
    const asked: string[][] = [];
    let consensus = nsEntry('a', fp('a'), '127.20.0.1', 'Exit Running Valid') + nsEntry('b', fp('b'), '127.21.0.1', 'Exit Running Valid');
    const getInfo = async (keys: readonly string[]): Promise<Map<string, string>> => {
      asked.push([...keys]);
      return new Map(keys.map((k) => [k, k === 'ns/all' ? consensus : k.startsWith('ip-to-country/') ? 'nl' : 'p accept 1-65535']));
    };
    const catalog = new ExitCatalog();
    expect(await catalog.refresh(getInfo, 1)).to.deep.equal([]);
    expect(catalog.all().map((e) => e.country)).to.deep.equal(['nl', 'nl']);
    consensus = nsEntry('a', fp('a'), '127.20.0.1', 'Exit Running Valid');
    asked.length = 0;
    expect(await catalog.refresh(getInfo, 2)).to.deep.equal([fp('b')]);
    expect(asked).to.deep.equal([['ns/all']]);
    expect(catalog.updatedAt).to.equal(2);
  });
});

describe('exit catalog: what tor cannot answer yet', () => {
  // Tor's GETINFO fails as a whole when one key has no answer: 552 for a relay whose
  // microdescriptor it has not downloaded, 551 without GeoIP data (control_getinfo.c).
  function torLike(consensus: string, missingMd: Set<string>, geoip: boolean, asked: string[][]) {
    return async (keys: readonly string[]): Promise<Map<string, string>> => {
      asked.push([...keys]);
      const out = new Map<string, string>();
      for (const k of keys) {
        if (k === 'ns/all') out.set(k, consensus);
        else if (k.startsWith('md/id/')) {
          const hex = k.slice('md/id/'.length);
          if (missingMd.has(hex)) throw new ControlCommandError(`GETINFO ${keys.join(' ')}`, 552, `Unrecognized key "${k}"`);
          out.set(k, `p accept 1-65535\nfamily ${hex === fp('a') ? '$' + fp('b') : '$' + fp('a')}\n`);
        } else if (k.startsWith('ip-to-country/')) {
          if (!geoip) throw new ControlCommandError(`GETINFO ${keys.join(' ')}`, 551, 'GeoIP data not loaded');
          out.set(k, 'de');
        }
      }
      return out;
    };
  }
  const three = nsEntry('a', fp('a'), '127.20.0.1', 'Exit Running Valid') + nsEntry('b', fp('b'), '127.21.0.1', 'Exit Running Valid') + nsEntry('c', fp('c'), '127.22.0.1', 'Exit Running Valid');

  it('reads the rest of the catalog when a microdescriptor is missing, and asks for it again next time', async () => {
    const asked: string[][] = [];
    const missing = new Set([fp('b')]);
    const catalog = new ExitCatalog();
    await catalog.refresh(torLike(three, missing, true, asked), 1);
    expect(catalog.all().map((e) => e.nickname)).to.deep.equal(['a', 'b', 'c']);
    // b's half of the family is unknown, so a and b are not one family yet.
    expect(catalog.get(fp('a'))?.family).to.equal(fp('a'));
    expect(catalog.get(fp('b'))?.family).to.equal(fp('b'));
    missing.clear();
    asked.length = 0;
    await catalog.refresh(torLike(three, missing, true, asked), 2);
    expect(asked).to.deep.equal([['ns/all'], [`md/id/${fp('b')}`]]);
    expect(catalog.get(fp('b'))?.family).to.equal(fp('a'));
  });

  it('builds the catalog without countries when tor has no GeoIP data, and still fails on other errors', async () => {
    const catalog = new ExitCatalog();
    await catalog.refresh(torLike(three, new Set(), false, []), 1);
    expect(catalog.all().map((e) => e.country)).to.deep.equal(['', '', '']);
    const broken = async (keys: readonly string[]): Promise<Map<string, string>> => {
      if (keys[0] === 'ns/all') return new Map([['ns/all', three]]);
      throw new ControlCommandError('GETINFO', 510, 'Unrecognized command');
    };
    let failure: unknown;
    await new ExitCatalog().refresh(broken, 1).catch((e: unknown) => (failure = e));
    expect(failure).to.be.instanceOf(ControlCommandError);
  });

  it('isolates each missing key among many in a few commands', async () => {
    let consensus = '';
    for (let i = 0; i < 200; i++) consensus += nsEntry(`r${i}`, i.toString(16).padStart(40, '0').toUpperCase(), `10.${i}.0.1`, 'Exit Running Valid');
    const missing = new Set(['7', '150'].map((i) => Number(i).toString(16).padStart(40, '0').toUpperCase()));
    const asked: string[][] = [];
    const catalog = new ExitCatalog();
    await catalog.refresh(torLike(consensus, missing, true, asked), 1);
    expect(catalog.size).to.equal(200);
    const mdCommands = asked.filter((keys) => keys[0]?.startsWith('md/id/'));
    expect(mdCommands.length).to.be.at.most(2 * 2 * Math.ceil(Math.log2(200)) + 1);
  });

  it('reads every family again after FAMILY_REREAD_MS (an operator may edit MyFamily)', async () => {
    const asked: string[][] = [];
    const catalog = new ExitCatalog();
    await catalog.refresh(torLike(three, new Set(), true, asked), 1);
    asked.length = 0;
    await catalog.refresh(torLike(three, new Set(), true, asked), 1 + FAMILY_REREAD_MS - 1);
    expect(asked).to.deep.equal([['ns/all']]);
    await catalog.refresh(torLike(three, new Set(), true, asked), 1 + FAMILY_REREAD_MS);
    expect(asked.slice(1).flat().filter((k) => k.startsWith('md/id/'))).to.have.length(3);
  });
});

describe('exit choice', () => {
  const exits = [relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.0.1.1', { family: fp('d') }), relay('d', '10.0.2.1')];

  it('keeps instances apart by relay, /24 or family as configured', () => {
    const taken = [exits[0] as ExitRelay, exits[3] as ExitRelay];
    const pick = (unit: 'relay' | 'subnet' | 'family'): string[] => {
      const seen = new Set<string>();
      for (let i = 0; i < 50; i++) {
        const c = chooseExit({ exits, taken, unit, excluded: () => false, random: () => i / 50 });
        if (c.ok && c.distinct) seen.add(c.relay.nickname);
      }
      return [...seen].sort();
    };
    expect(pick('relay')).to.deep.equal(['nb', 'nc']);
    expect(pick('subnet')).to.deep.equal(['nc']);
    expect(pick('family')).to.deep.equal([]);
  });

  it('reports a shortage (distinct false) with the least-shared exit instead of failing', () => {
    const c = chooseExit({ exits: exits.slice(0, 2), taken: exits.slice(0, 1), unit: 'subnet', excluded: () => false, random: () => 0 });
    expect(c).to.deep.include({ ok: true, distinct: false });
    expect(chooseExit({ exits, taken: [], unit: 'relay', excluded: () => true, random: () => 0 })).to.deep.equal({ ok: false, reason: 'no_eligible_exit' });
  });

  it('in a shortage gives a relay no instance holds before a less crowded /24 (the fleet e2e: two instances on one relay, one relay unused)', () => {
    // The private network's case: 127.20.0.0/24 holds two instances' exits, 127.25.0.0/24 one
    // instance's; the free relay left is in the crowded /24. Summed, both scored 2.
    const inTwenty = [relay('1', '127.20.0.2'), relay('0', '127.20.0.1')];
    const held = relay('6', '127.25.0.1');
    const free = relay('5', '127.20.0.3');
    for (const unit of ['subnet', 'family'] as const) {
      for (let i = 0; i < 20; i++) {
        const c = chooseExit({ exits: [...inTwenty, held, free], taken: [...inTwenty, held], unit, excluded: () => false, random: () => i / 20 });
        expect(c, `${unit}, random ${i / 20}`).to.deep.equal({ ok: true, relay: free, distinct: false });
      }
    }
  });

  it('in a shortage never puts a second instance on a relay while another relay is free (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ c: fc.constantFrom(...'0123456789abcdef'), block: fc.integer({ min: 0, max: 2 }) }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.constantFrom('subnet' as const, 'family' as const),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (specs, takenIndexes, unit, r) => {
          const all = [...new Map(specs.map((s) => [s.c, relay(s.c, `10.0.${s.block}.${s.c.charCodeAt(0)}`)])).values()];
          const taken = takenIndexes.map((i) => all[i % all.length] as ExitRelay);
          const c = chooseExit({ exits: all, taken, unit, excluded: () => false, random: () => r });
          if (!c.ok) return false;
          const onRelay = (e: ExitRelay): number => taken.filter((t) => t.fingerprint === e.fingerprint).length;
          return onRelay(c.relay) === Math.min(...all.map(onRelay));
        },
      ),
    );
  });

  it('weights by bandwidth, and honours TOR_EXIT_NODES (strict or as a preference)', () => {
    const heavy = [relay('a', '10.0.0.1', { bandwidth: 9000 }), relay('b', '10.1.0.1', { bandwidth: 1000 })];
    let a = 0;
    for (let i = 0; i < 100; i++) {
      const c = chooseExit({ exits: heavy, taken: [], unit: 'subnet', excluded: () => false, random: () => i / 100 });
      if (c.ok && c.relay.nickname === 'na') a++;
    }
    expect(a).to.equal(90);
    const nl = (e: ExitRelay): boolean => matchesNodeList(e, ['{nl}']);
    expect(chooseExit({ exits: heavy, taken: [], unit: 'subnet', excluded: () => false, preferred: nl, strict: true, random: () => 0 }).ok).to.equal(false);
    expect(chooseExit({ exits: heavy, taken: [], unit: 'subnet', excluded: () => false, preferred: nl, strict: false, random: () => 0 }).ok).to.equal(true);
  });

  it('never picks an excluded exit and always picks a distinct one when one exists (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ c: fc.constantFrom(...'0123456789abcdef'), block: fc.integer({ min: 0, max: 5 }), bw: fc.integer({ min: 1, max: 5000 }) }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 4 }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (specs, takenCount, r) => {
          const all = [...new Map(specs.map((s) => [s.c, relay(s.c, `10.0.${s.block}.${s.c.charCodeAt(0)}`, { bandwidth: s.bw })])).values()];
          const taken = all.slice(0, takenCount);
          const excluded = (e: ExitRelay): boolean => e.fingerprint === all[all.length - 1]?.fingerprint;
          const c = chooseExit({ exits: all, taken, unit: 'subnet', excluded, random: () => r });
          const used = new Set(taken.flatMap((t) => distinctKeys(t, 'subnet')));
          const distinctExists = all.some((e) => !excluded(e) && distinctKeys(e, 'subnet').every((k) => !used.has(k)));
          if (!c.ok) return all.every(excluded);
          return !excluded(c.relay) && c.distinct === distinctExists;
        },
      ),
    );
  });

  it('matches node lists by country, fingerprint, nickname and CIDR', () => {
    const r = relay('a', '127.20.0.1', { nickname: 'Exit1', country: 'de' });
    expect(matchesNodeList(r, ['{de}'])).to.equal(true);
    expect(matchesNodeList(r, [`$${fp('a')}`])).to.equal(true);
    expect(matchesNodeList(r, [`$${fp('a')}~other`])).to.equal(false);
    expect(matchesNodeList(r, ['exit1'])).to.equal(true);
    expect(matchesNodeList(r, ['127.20.0.0/16'])).to.equal(true);
    expect(matchesNodeList(r, ['127.21.0.0/16'])).to.equal(false);
    expect(matchesNodeList(r, ['0.0.0.0/0'])).to.equal(true);
  });
});

describe('exit bans and assignments', () => {
  it('bans by fingerprint and address until the TTL, lists and lifts them', () => {
    const bans = new ExitBans();
    bans.ban({ fingerprint: fp('a'), address: '10.0.0.1', nickname: 'a' }, 'captcha', 'two captchas', 1000, 500);
    expect(bans.isBanned({ fingerprint: fp('a'), address: '9.9.9.9' }, 1200)).to.equal(true);
    expect(bans.isBanned({ fingerprint: fp('b'), address: '10.0.0.1' }, 1200), 're-keyed relay on the burnt address').to.equal(true);
    expect(bans.isBanned({ fingerprint: fp('a'), address: '10.0.0.1' }, 1500)).to.equal(false);
    expect(bans.list(1500)).to.deep.equal([]);
    bans.ban({ fingerprint: fp('a'), address: '10.0.0.1', nickname: 'a' }, 'blocked', 'x', 2000, 500);
    expect(bans.lift(fp('a'))).to.equal(true);
    expect(bans.lift(fp('a'))).to.equal(false);
  });

  it('bans an exit for one site only: everyone else may still be assigned it', () => {
    const bans = new ExitBans();
    bans.ban({ fingerprint: fp('a'), address: '10.0.0.1', nickname: 'a' }, 'captcha', 'x', 0, 1000, 'shop.example');
    expect(bans.isBanned({ fingerprint: fp('a'), address: '10.0.0.1' }, 1)).to.equal(false);
    expect(bans.isBanned({ fingerprint: fp('a'), address: '10.0.0.1' }, 1, ['other.example'])).to.equal(false);
    expect(bans.isBanned({ fingerprint: fp('a'), address: '10.0.0.1' }, 1, ['shop.example'])).to.equal(true);
    bans.ban({ fingerprint: fp('a'), address: '10.0.0.1', nickname: 'a' }, 'blocked', 'y', 0, 1000);
    expect(bans.list(1).map((b) => b.domain).sort()).to.deep.equal(['', 'shop.example']);
    expect(bans.lift(fp('a'))).to.equal(true);
    expect(bans.size, 'lifting lifts every ban of the relay').to.equal(0);
  });

  function assignments(exits: ExitRelay[], now = { t: 0 }): ExitAssignments {
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: logger(), now: () => now.t, random: () => 0 });
    a.catalog.replace(exits, 1);
    return a;
  }

  it('gives instances distinct /24s, a fresh exit on rotation, and reports the shortage', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.1.0.1')]);
    const first = a.next(0, { fresh: false, why: 'bootstrap' });
    const second = a.next(1, { fresh: false, why: 'bootstrap' });
    expect(first.ok && second.ok && first.relay.block !== second.relay.block).to.equal(true);
    const third = a.next(2, { fresh: false, why: 'bootstrap' });
    expect(third).to.deep.include({ ok: true, distinct: false });
    expect(a.shortageOf(2)).to.match(/shares its \/24/);
    const before = a.current(0);
    const rotated = a.next(0, { fresh: true, why: 'api' });
    expect(rotated.ok && rotated.relay.fingerprint !== before).to.equal(true);
    expect(a.assignedCount()).to.be.at.most(3);
  });

  it('gives a free suspect exit before another instance’s relay: one IP twice is worse than an exit one party complained of', () => {
    const now = { t: 0 };
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('c', '10.2.0.1')], now);
    a.markSuspect(fp('b'), 1000);
    a.markSuspect(fp('c'), 1000);
    const first = a.next(0, { fresh: false, why: 'bootstrap' });
    expect(first.ok && first.relay.fingerprint, 'the one exit nobody complained of').to.equal(fp('a'));
    // Every exit but the taken one is suspect: a suspect relay of its own, not instance 0's relay.
    for (let draw = 0; draw < 10; draw++) {
      const second = a.next(1, { fresh: false, why: 'ladder' });
      expect(second.ok && second.relay.fingerprint, `draw ${draw}`).to.be.oneOf([fp('b'), fp('c')]);
    }
    // A suspect exit still comes after a free one nobody complained of.
    const fresh = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('d', '10.3.0.1')], now);
    fresh.markSuspect(fp('b'), 1000);
    fresh.next(0, { fresh: false, why: 'bootstrap' });
    const third = fresh.next(1, { fresh: false, why: 'bootstrap' });
    expect(third.ok && third.relay.fingerprint).to.be.oneOf([fp('a'), fp('d')]);
  });

  it('moves an instance off another instance’s relay once a relay frees up (another node’s lease lapsed), the first holder keeping it', () => {
    const audit = new AuditLog();
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit, log: logger(), now: () => 0, random: () => 0 });
    a.catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('c', '10.2.0.1')], 1);
    const gone = answerExitGone(a);
    // node-b holds c: three instances here on two relays, one of them twice (the fleet e2e's case).
    a.setHeldElsewhere(new Map([[fp('c'), 'node-b']]));
    for (const id of [0, 1, 2]) a.next(id, { fresh: false, why: 'bootstrap' });
    const onShared = [0, 1, 2].filter((id) => [0, 1, 2].some((other) => other !== id && a.current(other) === a.current(id)));
    expect(onShared, 'two instances on one relay while node-b holds the third').to.have.length(2);
    expect(gone, 'nothing free: nobody moves').to.deep.equal([]);
    a.setHeldElsewhere(new Map([[fp('c'), 'node-b']]));
    expect(gone, 'a renewal that frees nothing moves nobody').to.deep.equal([]);
    // node-b's lease lapsed: the instance that came second moves to c, the first keeps its relay.
    const [first, second] = onShared as [number, number];
    const kept = a.current(first);
    a.setHeldElsewhere(new Map());
    expect(gone).to.deep.equal([[second]]);
    expect(a.current(first)).to.equal(kept);
    expect(a.current(second)).to.equal(fp('c'));
    expect(new Set([0, 1, 2].map((id) => a.current(id))).size, 'three relays for three instances').to.equal(3);
    expect(a.shortageOf(second)).to.equal('');
    const said = audit.recent(20).filter((e) => e.details.reason === 'relay_shared');
    expect(said.map((e) => e.instance)).to.deep.equal([second]);
    expect(said[0]?.message).to.match(new RegExp(`instance ${second} shares exit n[ab] \\(10\\.[01]\\.0\\.1\\) with instance ${first} while a relay of its own is free`));
  });

  it('leaves a shared relay only with an idle instance on an exit the pool chose itself: sessions keep their IP', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('c', '10.2.0.1')]);
    const busy = new Set<number>();
    a.setIdle((id) => !busy.has(id));
    const gone = answerExitGone(a);
    a.setHeldElsewhere(new Map([[fp('b'), 'node-b'], [fp('c'), 'node-b']]));
    a.next(0, { fresh: false, why: 'bootstrap' });
    a.next(1, { fresh: false, why: 'bootstrap' });
    expect([a.current(0), a.current(1)]).to.deep.equal([fp('a'), fp('a')]);
    // The first holder serves sessions, the second does not: the second moves.
    busy.add(0);
    a.setHeldElsewhere(new Map([[fp('c'), 'node-b']]));
    expect(gone).to.deep.equal([[1]]);
    expect([a.current(0), a.current(1)]).to.deep.equal([fp('a'), fp('b')]);
    // Both busy: nobody moves; the one without sessions moves once they are gone, even the relay's first holder.
    a.next(2, { fresh: false, why: 'bootstrap' });
    expect(a.current(2)).to.be.oneOf([fp('a'), fp('b')]);
    busy.add(1).add(2);
    a.setHeldElsewhere(new Map());
    expect(gone, 'every instance on a shared relay serves sessions').to.have.length(1);
    const sharing = a.current(2) === fp('a') ? 0 : 1;
    busy.delete(sharing);
    a.setHeldElsewhere(new Map());
    expect(gone.at(-1)).to.deep.equal([sharing]);
    expect(a.current(sharing)).to.equal(fp('c'));
    // An exit chosen for a session's own request (its countries, its recent exits) is not taken from it.
    const own = assignments([relay('a', '10.0.0.1', { country: 'nl' }), relay('b', '10.1.0.1')]);
    const moved: number[][] = [];
    own.on('exit-gone', (ids) => moved.push(ids));
    own.setHeldElsewhere(new Map([[fp('b'), 'node-b']]));
    own.next(0, { fresh: false, why: 'bootstrap' });
    own.next(1, { fresh: true, why: 'country', countries: ['nl'], session: 'k' });
    expect([own.current(0), own.current(1)]).to.deep.equal([fp('a'), fp('a')]);
    own.setHeldElsewhere(new Map());
    expect(moved, 'instance 1 keeps the exit its session asked for; idle instance 0, its first holder, leaves it').to.deep.equal([[0]]);
  });

  it('gives an instance that found no eligible exit (tor’s own selection) one as soon as one is eligible, said once', () => {
    const audit = new AuditLog();
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit, log: logger(), now: () => 0, random: () => 0 });
    a.catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')], 1);
    a.setHeldElsewhere(new Map([[fp('a'), 'node-b'], [fp('b'), 'node-b']]));
    expect(a.next(0, { fresh: false, why: 'bootstrap' }).ok, 'node-b holds every exit').to.equal(false);
    const gone: number[][] = [];
    a.on('exit-gone', (ids) => gone.push(ids));
    a.setHeldElsewhere(new Map([[fp('a'), 'node-b'], [fp('b'), 'node-b']]));
    expect(gone, 'still nothing eligible').to.deep.equal([]);
    // node-b let b go; instance 0 is not ready to move yet, so it is asked again at the next renewal, said once.
    a.setHeldElsewhere(new Map([[fp('a'), 'node-b']]));
    a.setHeldElsewhere(new Map([[fp('a'), 'node-b']]));
    expect(gone).to.deep.equal([[0], [0]]);
    const said = audit.recent(20).filter((e) => e.details.reason === 'exit_eligible_again');
    expect(said.map((e) => e.message)).to.deep.equal(['instance 0 has no exit assigned (no eligible exit: 2 in the catalog, 0 banned, 2 held by other nodes) and one is eligible now: it is given one']);
    const next = a.next(0, { fresh: true, why: 'exit_gone' });
    expect(next.ok && next.relay.fingerprint).to.equal(fp('b'));
  });

  it('moves one of two instances on a relay when the instance on a third relay leaves, and only as many as relays are free', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')]);
    const gone = answerExitGone(a);
    for (const id of [0, 1, 2, 3]) a.next(id, { fresh: false, why: 'bootstrap' });
    const holders = (f: string | undefined): number[] => [0, 1, 2, 3].filter((id) => a.current(id) === f);
    expect(holders(fp('a')).length + holders(fp('b')).length).to.equal(4);
    // One instance on b leaves: b still held, nothing free, nobody moves.
    const onB = holders(fp('b'));
    const leaving = onB.at(-1) as number;
    a.release(leaving);
    expect(gone).to.deep.equal([]);
    // Every instance on b leaves: b is free, one instance of a moves there, the others stay.
    for (const id of holders(fp('b'))) a.release(id);
    expect(gone).to.have.length(1);
    expect(gone[0]).to.have.length(1);
    expect(holders(fp('b'))).to.deep.equal(gone[0]);
  });

  it('moves an idle instance off a shared /24 once a /24 of its own frees up (EXIT_DISTINCT=subnet), said as unit_shared; the instance that stays is distinct again', () => {
    const audit = new AuditLog();
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit, log: logger(), now: () => 0, random: () => 0 });
    // Two /24s for three instances: two share one, in a shortage said out loud.
    a.catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.1.0.1'), relay('d', '10.2.0.1')], 1);
    const gone = answerExitGone(a);
    a.banAssigned(9, 'captcha', 'held back for the test', fp('d'));
    for (const id of [0, 1, 2]) a.next(id, { fresh: false, why: 'bootstrap' });
    const block = (id: number): string => a.assignment(id)?.block ?? '';
    const sharers = [0, 1, 2].filter((id) => a.assignment(id)?.distinct === false);
    expect(sharers, 'one instance assigned in a shortage').to.have.length(1);
    expect(new Set([0, 1, 2].map(block)).size).to.equal(2);
    // A /24 frees (the ban is lifted; the next catalog refresh or renewal checks): the sharer moves there.
    a.liftBan(fp('d'));
    a.setUnitsHeldElsewhere(new Map());
    expect(gone).to.deep.equal(sharers.map((id) => [id]));
    expect(new Set([0, 1, 2].map(block)).size, 'three /24s for three instances').to.equal(3);
    expect([0, 1, 2].map((id) => [a.assignment(id)?.distinct, a.shortageOf(id)])).to.deep.equal([[true, ''], [true, ''], [true, '']]);
    const said = audit.recent(30).filter((e) => e.details.reason === 'unit_shared');
    expect(said.map((e) => e.instance)).to.deep.equal(sharers);
    expect(said[0]?.message).to.match(/^exit n[ab] \(10\.0\.0\.[12]\) of instance \d shares its \/24 with instance \d while one of its own is free: it moves to another exit$/);
    // A check that frees nothing moves nobody.
    a.setUnitsHeldElsewhere(new Map());
    expect(gone).to.have.length(1);
  });

  it('gives an instance its exit from before a restart even when it shares a /24, and says the shortage as any other (here, and with a unit another node leases)', () => {
    const restored = (pairs: [number, string, string][]): Map<number, { fingerprint: string; nickname: string; address: string }> =>
      new Map(pairs.map(([id, c, address]) => [id, { fingerprint: fp(c), nickname: `n${c}`, address }]));
    // Two instances that shared a /24 before the restart (a shortage then): the first to claim its exit is distinct, the second not, and says so.
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.1.0.1')]);
    a.restore(restored([[0, 'a', '10.0.0.1'], [1, 'b', '10.0.0.2']]), []);
    a.next(0, { fresh: false, why: 'bootstrap' });
    const second = a.next(1, { fresh: false, why: 'bootstrap' });
    expect([a.current(0), a.current(1)], 'each has its exit back').to.deep.equal([fp('a'), fp('b')]);
    expect(second).to.deep.include({ ok: true, distinct: false });
    expect([[a.assignment(0)?.distinct, a.shortageOf(0)], [a.assignment(1)?.distinct, a.shortageOf(1)]]).to.deep.equal([
      [true, ''],
      [false, "its exit from before the restart shares its /24 with another instance's"],
    ]);
    // On a node of a fleet whose /24 another node leased meanwhile: kept for its sessions, but not distinct, and no unit lease claimed for it.
    const f = assignments([relay('a', '10.0.0.1'), relay('c', '10.1.0.1')]);
    f.restore(restored([[0, 'a', '10.0.0.1']]), []);
    f.setUnitsHeldElsewhere(new Map([['block:10.0.0.0/24', 'node-b']]));
    const back = f.next(0, { fresh: false, why: 'bootstrap' });
    expect(back).to.deep.include({ ok: true, distinct: false });
    expect(f.current(0)).to.equal(fp('a'));
    expect(f.shortageOf(0)).to.equal("its exit from before the restart shares its /24 with another instance's (on this node or another of the fleet)");
    expect([...f.heldUnits().keys()], 'a unit held by another node is not claimed').to.deep.equal([]);
  });

  it('ends a /24 shortage without a move when the other holder leaves, and moves a busy sharer never, only as many idle ones as /24s are free', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.0.0.3'), relay('d', '10.1.0.1'), relay('e', '10.2.0.1')]);
    const busy = new Set<number>();
    a.setIdle((id) => !busy.has(id));
    const gone = answerExitGone(a);
    a.banAssigned(9, 'captcha', 'held back', fp('d'));
    a.banAssigned(9, 'captcha', 'held back', fp('e'));
    for (const id of [0, 1, 2]) a.next(id, { fresh: false, why: 'bootstrap' });
    expect([0, 1, 2].map((id) => a.assignment(id)?.block)).to.deep.equal(['10.0.0.0/24', '10.0.0.0/24', '10.0.0.0/24']);
    // One /24 frees, instance 2 serves sessions: of the idle ones, one moves (the highest), the other keeps the /24 with 2.
    busy.add(2);
    a.liftBan(fp('d'));
    a.setUnitsHeldElsewhere(new Map());
    expect(gone).to.deep.equal([[1]]);
    expect(a.current(1)).to.equal(fp('d'));
    expect(a.assignment(0)?.distinct === false || a.assignment(2)?.distinct === false, 'instances 0 and 2 still share').to.equal(true);
    // A second /24 frees: instance 2 still serves sessions, so idle instance 0 moves.
    a.liftBan(fp('e'));
    a.setUnitsHeldElsewhere(new Map());
    expect(gone).to.deep.equal([[1], [0]]);
    expect(a.current(0)).to.equal(fp('e'));
    expect([0, 1, 2].map((id) => a.shortageOf(id))).to.deep.equal(['', '', '']);
    expect(a.assignment(2)?.distinct, 'alone on its /24 now, without moving').to.equal(true);
    // On one node, the other holder leaving ends the shortage at once: no move, no shortage left.
    const b = assignments([relay('a', '10.0.0.1'), relay('b', '10.0.0.2')]);
    const moved: number[][] = [];
    b.on('exit-gone', (ids) => moved.push(ids));
    b.next(0, { fresh: false, why: 'bootstrap' });
    b.next(1, { fresh: false, why: 'bootstrap' });
    const shared = [0, 1].find((id) => b.assignment(id)?.distinct === false) as number;
    expect(b.shortageOf(shared)).to.match(/shares its \/24/);
    b.release(shared === 0 ? 1 : 0);
    expect(moved).to.deep.equal([]);
    expect([b.assignment(shared)?.distinct, b.shortageOf(shared)]).to.deep.equal([true, '']);
  });

  it('once other nodes’ leases lapse, every instance has an exit and every relay, then every /24, is in use before any is used twice (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom(...'0123456789abcdef'), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 1, max: 14 }),
        fc.array(fc.boolean(), { minLength: 10, maxLength: 10 }),
        fc.array(fc.double({ min: 0, max: 0.999, noNaN: true }), { minLength: 1, maxLength: 8 }),
        (names, instances, heldMask, draws) => {
          let draw = 0;
          const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: logger(), now: () => 0, random: () => draws[draw++ % draws.length] as number });
          a.catalog.replace(names.map((c, i) => relay(c, `10.0.${i % 3}.${i + 1}`)), 1);
          a.on('exit-gone', (ids) => {
            for (const id of ids) a.next(id, { fresh: true, why: 'exit_gone' });
          });
          a.setHeldElsewhere(new Map(names.filter((_, i) => heldMask[i]).map((c) => [fp(c), 'node-b'])));
          for (let id = 0; id < instances; id++) a.next(id, { fresh: false, why: 'bootstrap' });
          a.setHeldElsewhere(new Map());
          const pinned = Array.from({ length: instances }, (_, id) => a.current(id));
          if (!(pinned.every((f) => f !== undefined) && new Set(pinned).size === Math.min(instances, names.length))) return false;
          // The units other nodes hold are read right after (the fleet's renewal): every /24 is in use before any is used twice too, no relay given up for it.
          a.setUnitsHeldElsewhere(new Map());
          const blocks = Array.from({ length: instances }, (_, id) => a.assignment(id)?.block);
          const relays = new Set(Array.from({ length: instances }, (_, id) => a.current(id))).size;
          const shortages = Array.from({ length: instances }, (_, id) => a.shortageOf(id) !== '').filter(Boolean).length;
          return new Set(blocks).size === Math.min(instances, Math.min(names.length, 3)) && relays === Math.min(instances, names.length) && shortages === Math.max(0, instances - Math.min(names.length, 3));
        },
      ),
    );
  });

  it('never assigns a banned exit while the ban holds, and says so when nothing is left', () => {
    const now = { t: 0 };
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')], now);
    a.banAssigned(0, 'captcha', 'x', fp('a'));
    for (let i = 0; i < 5; i++) {
      const n = a.next(0, { fresh: false, why: 'bootstrap' });
      expect(n.ok && n.relay.fingerprint).to.equal(fp('b'));
    }
    a.banAssigned(0, 'blocked', 'y', fp('b'));
    const none = a.next(0, { fresh: false, why: 'ladder' });
    expect(none.ok).to.equal(false);
    now.t = 2000; // the bans expired
    expect(a.next(0, { fresh: false, why: 'ladder' }).ok).to.equal(true);
  });

  it('assigns by country within the bans and the distinctness, and says when the country has nothing left', () => {
    const a = assignments([
      relay('a', '10.0.0.1', { country: 'us' }),
      relay('b', '10.0.0.2', { country: 'us' }),
      relay('c', '10.1.0.1', { country: 'us' }),
      relay('d', '10.2.0.1', { country: 'de' }),
    ]);
    const us = { fresh: false, why: 'session', countries: ['us'] } as const;
    a.banAssigned(9, 'captcha', 'x', fp('c'));
    expect(a.hasEligibleIn(['us'])).to.equal(true);
    const first = a.next(0, us);
    expect(first.ok && first.relay.country).to.equal('us');
    expect(first.ok && first.relay.fingerprint, 'never the banned one').to.not.equal(fp('c'));
    // The other us exit shares the first one's /24: it is given, and the shortage said.
    const second = a.next(1, us);
    expect(second).to.deep.include({ ok: true, distinct: false });
    expect(second.ok && second.relay.country).to.equal('us');
    expect(a.shortageOf(1)).to.match(/shares its \/24/);
    // Nothing in a country whose only exit is banned.
    a.banAssigned(9, 'blocked', 'y', fp('d'));
    expect(a.hasEligibleIn(['de'])).to.equal(false);
    expect(a.next(2, { fresh: false, why: 'session', countries: ['de'] }).ok).to.equal(false);
  });

  it('keeps a session\'s sites away from exits banned for them, and counts such exits as eligible', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')]);
    a.banAssigned(0, 'captcha', 'x', fp('a'), 'shop.example');
    expect(a.eligibleCount()).to.equal(2);
    for (let i = 0; i < 5; i++) {
      const n = a.next(i, { fresh: false, why: 'session', avoid: { addresses: [], domains: ['shop.example'] } });
      expect(n.ok && n.relay.fingerprint).to.equal(fp('b'));
    }
    expect(a.bannedFor({ fingerprint: fp('a'), address: '10.0.0.1' }, ['shop.example'])).to.equal(true);
    expect(a.bannedFor({ fingerprint: fp('a'), address: '10.0.0.1' }, [])).to.equal(false);
    expect(exitsViewOf(a, [], 0).exits.find((e) => e.fingerprint === fp('a'))?.banned).to.equal(null);
  });

  it('avoids a session\'s recent exits and their /24s', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.0.0.2'), relay('c', '10.1.0.1')]);
    for (let i = 0; i < 5; i++) {
      const n = a.next(i, { fresh: true, why: 'session', avoid: { addresses: ['10.0.0.1'] } });
      expect(n.ok && n.relay.address).to.equal('10.1.0.1');
    }
  });

  it('refreshes through any instance that answers, and forgets an instance that left', async () => {
    const a = assignments([]);
    const consensus = nsEntry('x', fp('a'), '10.0.0.1', 'Exit Running Valid');
    const answering = async (keys: readonly string[]): Promise<Map<string, string>> => new Map(keys.map((k) => [k, k === 'ns/all' ? consensus : '']));
    const dead = (): Promise<Map<string, string>> => Promise.reject(new Error('no control connection'));
    await a.ensureCatalog(0, answering);
    await a.ensureCatalog(1, dead);
    expect(await a.refreshFromAnySource(), 'the newest fails, the older answers').to.equal(true);
    expect(a.catalog.size).to.equal(1);
    a.release(0);
    expect(await a.refreshFromAnySource()).to.equal(false);
  });

  it('reports instances whose exit left the consensus', async () => {
    const a = assignments([relay('a', '10.0.0.1')]);
    a.next(3, { fresh: false, why: 'bootstrap' });
    const gone: number[][] = [];
    a.on('exit-gone', (ids) => gone.push(ids));
    await a.refresh(async (keys) => new Map(keys.map((k) => [k, ''])));
    expect(gone).to.deep.equal([[3]]);
  });

  it('views the catalog for the API and lifts bans only for a well-formed, banned fingerprint', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')]);
    a.next(0, { fresh: false, why: 'bootstrap' });
    a.banAssigned(1, 'transport', 'run', fp('b'));
    const view = exitsViewOf(a, [0, 1], 0);
    expect(view).to.deep.include({ assigning: true, distinct_by: 'subnet', in_use: 1, eligible: 1 });
    expect(view.exits[0]?.instances).to.deep.equal([0]);
    expect(view.bans.map((b) => b.cause)).to.deep.equal(['transport']);
    expect(() => liftBan(a, 'nope')).to.throw(/40 hexadecimal/);
    expect(() => liftBan(a, fp('a'))).to.throw(/not banned/);
    expect(liftBan(a, `$${fp('b').toLowerCase()}`)).to.equal(null);
    expect(exitsViewOf(undefined, [0], 0).assigning).to.equal(false);
    expect(view.fleet).to.equal(null);
    expect(view.exits.every((e) => e.held_by === null)).to.equal(true);
  });

  it('views the exits another node holds with its name, and the fleet', () => {
    const a = assignments([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('c', '10.2.0.1')]);
    a.setHeldElsewhere(new Map([[fp('b'), 'node-b']]));
    const view = exitsViewOf(a, [], 0, { node: 'node-a', nodes: ['node-a', 'node-b'] });
    expect(view.fleet).to.deep.equal({ node: 'node-a', nodes: ['node-a', 'node-b'] });
    expect(view.exits.find((e) => e.fingerprint === fp('b'))?.held_by).to.equal('node-b');
    expect(view.exits.find((e) => e.fingerprint === fp('a'))?.held_by).to.equal(null);
    expect(view.eligible, 'an exit held elsewhere is not eligible here').to.equal(2);
    // Never chosen, however often asked.
    for (let i = 0; i < 5; i++) {
      const next = a.next(i, { fresh: false, why: 'bootstrap' });
      expect(next.ok && next.relay.fingerprint).to.not.equal(fp('b'));
    }
  });
});

describe('exit sanctions: bans and suspects', () => {
  function sanctions(now: { t: number }): { s: ExitSanctions; said: { gone: number[][]; banned: string[]; lifted: string[]; freed: number; audited: string[] } } {
    const catalog = new ExitCatalog();
    catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')], 1);
    const table = new AssignmentTable(catalog, 'subnet');
    table.assigned.set(0, { relay: catalog.get(fp('a')) as ExitRelay, distinct: true });
    table.assigned.set(1, { relay: catalog.get(fp('a')) as ExitRelay, distinct: false });
    const said = { gone: [] as number[][], banned: [] as string[], lifted: [] as string[], freed: 0, audited: [] as string[] };
    const s = new ExitSanctions({
      catalog,
      table,
      bans: new ExitBans(),
      banTtlMs: 1000,
      now: () => now.t,
      eligible: () => [...catalog.all()],
      freed: () => said.freed++,
      say: {
        audit: (_i, message) => said.audited.push(message),
        exitGone: (ids) => said.gone.push(ids),
        assignmentsChanged: () => undefined,
        egressFailed: () => undefined,
        banned: (ban) => said.banned.push(ban.fingerprint),
        lifted: (f) => said.lifted.push(f),
      },
    });
    return { s, said };
  }

  it('a suspect ends at its time, or when the exit is banned; a ban for everyone moves every instance on it, one for a site none', () => {
    const now = { t: 0 };
    const { s, said } = sanctions(now);
    s.markSuspect(fp('a'), 100);
    s.markSuspect(fp('a'), 50);
    expect([s.isSuspect(fp('a')), s.isSuspect(fp('b'))], 'the later time stands').to.deep.equal([true, false]);
    now.t = 99;
    expect(s.isSuspect(fp('a'))).to.equal(true);
    now.t = 100;
    expect(s.isSuspect(fp('a')), 'over at its time').to.equal(false);
    s.banAssigned(0, 'captcha', 'one site complained', fp('a'), 'shop.example');
    expect(said.gone, 'a ban for one site moves nobody').to.deep.equal([]);
    expect([s.bannedFor({ fingerprint: fp('a'), address: '10.0.0.1' }, []), s.bannedFor({ fingerprint: fp('a'), address: '10.0.0.1' }, ['shop.example'])]).to.deep.equal([false, true]);
    s.markSuspect(fp('a'), 500);
    s.banAssigned(0, 'captcha', 'two parties complained', fp('a'));
    expect(s.isSuspect(fp('a')), 'banned: no longer merely suspect').to.equal(false);
    expect(said.gone).to.deep.equal([[0, 1]]);
    expect(said.banned).to.deep.equal([fp('a'), fp('a')]);
    expect(s.eligibleAfterBan(fp('b'))).to.deep.equal({ catalog: 2, eligible: 1, country: 'de', eligibleInCountry: 1 });
  });

  it('a ban lifted by hand is said to the fleet and frees the exit; one lifted on another node frees it without saying it back; lifting none does nothing', () => {
    const { s, said } = sanctions({ t: 0 });
    s.unreachable(1, fp('b'));
    expect(s.bannedFor({ fingerprint: fp('b'), address: '10.1.0.1' }, [])).to.equal(true);
    expect(s.liftBan(fp('b'))).to.equal(true);
    expect([said.lifted, said.freed]).to.deep.equal([[fp('b')], 1]);
    expect(s.liftBan(fp('b')), 'nothing left to lift').to.equal(false);
    s.applyFleetBan({ fingerprint: fp('b'), address: '10.1.0.1', nickname: 'nb', cause: 'captcha', reason: 'node-b', since: 0, until: 1000, domain: '' });
    s.applyFleetLift(fp('b'));
    s.applyFleetLift(fp('b'));
    expect([said.lifted, said.freed], 'a lift from the fleet is not said back to it').to.deep.equal([[fp('b')], 2]);
    expect(said.audited.filter((m) => m.includes('lifted'))).to.have.length(2);
  });
});

describe('exit freshness for a session', () => {
  const exit = (ip: string, fingerprint = fp('a')): ExitState => ({ exitIp: ip, exitCountry: '', exitNickname: '', exitFingerprint: fingerprint, exitConfirmed: true, retiredExitIp: '', pinnedExit: '', rotating: false });

  it('is fresh only outside the recent IPs, their /24s and the sites banned for the session', () => {
    const history = { addresses: ['10.0.0.1'], domains: ['shop.example'] };
    expect(isFreshExit(exit('10.0.0.2'), history)).to.equal(false);
    expect(isFreshExit(exit('10.0.1.2'), history)).to.equal(true);
    expect(isFreshExit(exit(''), history), 'unknown exit').to.equal(false);
    expect(isFreshExit(exit('10.0.1.2', fp('b')), history, (e, d) => e.fingerprint === fp('b') && d.includes('shop.example'))).to.equal(false);
  });

  it('ranks fresh instances first, then other IPs, then anything', () => {
    const candidates = [
      { id: 1, exit: exit('10.0.0.1') },
      { id: 2, exit: exit('10.0.0.2') },
      { id: 3, exit: exit('10.0.1.1') },
    ];
    expect(rankByFreshness(candidates, { addresses: ['10.0.0.1'], domains: [] })).to.deep.equal({ ids: [3], fresh: true });
    expect(rankByFreshness(candidates.slice(0, 2), { addresses: ['10.0.0.1'], domains: [] })).to.deep.equal({ ids: [2], fresh: false });
    expect(rankByFreshness(candidates.slice(0, 1), { addresses: ['10.0.0.1'], domains: [] })).to.deep.equal({ ids: [1], fresh: false });
  });

  it('puts an exit banned for a site the session reported behind every other, fresh or not', () => {
    const candidates = [
      { id: 1, exit: exit('10.0.0.1') },
      { id: 2, exit: exit('10.0.1.1') },
      { id: 3, exit: exit('10.0.2.1') },
    ];
    const bannedFor = (e: { address: string }, domains: readonly string[]) => e.address === '10.0.2.1' && domains.includes('shop.example');
    const history = { addresses: ['10.0.0.1', '10.0.1.1'], domains: ['shop.example'] };
    // No fresh exit: the one IP outside the history is banned for the site, so a repeat comes first.
    expect(rankByFreshness(candidates, history, bannedFor)).to.deep.equal({ ids: [1, 2], fresh: false });
    expect(rankByFreshness(candidates, { ...history, domains: ['other.example'] }, bannedFor)).to.deep.equal({ ids: [3], fresh: true });
    // Nothing else left: it is still a place to go.
    expect(rankByFreshness(candidates.slice(2), history, bannedFor)).to.deep.equal({ ids: [3], fresh: false });
  });

  it('remembers the last exits newest last', () => {
    expect(rememberExit(['a', 'b'], 'a', 2)).to.deep.equal(['b', 'a']);
    expect(rememberExit(['a', 'b'], 'c', 2)).to.deep.equal(['b', 'c']);
    expect(rememberExit(['a'], 'c', 0)).to.deep.equal(['a']);
    fc.assert(fc.property(fc.array(fc.ipV4()), fc.integer({ min: 0, max: 6 }), (ips, keep) => ips.reduce((r, ip) => rememberExit(r, ip, keep), [] as string[]).length <= keep));
  });
});
