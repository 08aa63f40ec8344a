/**
 * What sites see (issue 31): exits judged by the address their traffic leaves from. The parsers
 * (an IP-echo answer, the Tor exit list), the egress book and the catalog's overlay, the prober's
 * bounds, and how the assignments react: distinctness, bans, countries, the fleet's units, and
 * the evidence a failed probe is.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import '../support/fixtures/fuzz-runs.js';
import type { EgressFetch, EgressFetchResult } from '../../shared/ipc/protocol.js';
import { logger } from '../../shared/logger.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { MAX_ECHO_ANSWER_BYTES, normaliseAddress, readEgressAnswer } from '../../supervisor/exits/egress-answer.js';
import { EgressBook } from '../../supervisor/exits/egress-book.js';
import { EgressProber, MAX_CONCURRENT_EGRESS_PROBES } from '../../supervisor/exits/egress-prober.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { ECHO_ALIVE_MS, EGRESS_PROBE_RETRY_MS, type EgressProbeFailure } from '../../supervisor/exits/exit-egress.js';
import { MAX_ADDRESSES_PER_EXIT, parseExitList, parseListTime } from '../../supervisor/exits/exit-list.js';
import { addressBlock, type PublishedExit } from '../../supervisor/exits/exit-relay.js';
import { exitsViewOf } from '../../supervisor/exits/exits-view.js';
import type { GetInfo } from '../../supervisor/tor/relay-directory.js';

const fp = (c: string): string => c.repeat(40).toUpperCase();
const SOCKS = { host: '127.0.0.1', port: 9 };

function published(c: string, address: string, country = 'de'): PublishedExit {
  return { fingerprint: fp(c), nickname: `n${c}`, address, country, bandwidth: 1000, block: addressBlock(address), family: fp(c) };
}

/** tor's GeoIP answers, as `GETINFO ip-to-country/…` gives them. */
function geoip(countries: Record<string, string>): GetInfo {
  return (keys) => Promise.resolve(new Map(keys.map((k) => [k, countries[k.slice('ip-to-country/'.length)] ?? '??'])));
}

/** A fake proxy worker: the echo service answers, for the exit the instance is pinned to, what `answers` says. */
class FakeEcho {
  readonly asked: EgressFetch[] = [];
  /** Instance SocksPort → the exit fingerprint it leaves through. */
  readonly pinnedTo = new Map<number, string>();
  constructor(public answers: Record<string, EgressFetchResult | null>) {}
  readonly fetch = (f: EgressFetch): Promise<EgressFetchResult | null> => {
    this.asked.push(f);
    const exit = this.pinnedTo.get(f.socks.port) ?? '';
    return Promise.resolve(this.answers[exit] ?? { ok: false, failure: 'timeout', socksReply: null, status: null, detail: 'no answer' });
  };
}

const answer = (address: string): EgressFetchResult => ({ ok: true, status: 200, body: `${address}\n` });

function assignments(exits: PublishedExit[], echo: FakeEcho, options: { now?: { t: number }; exitList?: string; unit?: 'relay' | 'subnet' | 'family' } = {}): { a: ExitAssignments; audit: AuditLog } {
  const now = options.now ?? { t: 1_000_000 };
  const audit = new AuditLog();
  const a = new ExitAssignments({
    unit: options.unit ?? 'subnet',
    banTtlMs: 60_000,
    exitNodes: [],
    strictNodes: false,
    audit,
    log: logger(),
    now: () => now.t,
    random: () => 0,
    egress: { urls: ['http://whoami.testnet/ip'], ttlMs: 3_600_000, timeoutMs: 5_000, exitList: options.exitList ?? '', fetch: echo.fetch },
  });
  // An empty catalog is left unread: ensureCatalog reads it.
  if (exits.length > 0) a.catalog.replace(exits, now.t);
  return { a, audit };
}

/** Pins instance `id` as TorPoolInstance does: a choice, then the egress measured through its SocksPort. */
async function pin(a: ExitAssignments, echo: FakeEcho, id: number, settling = true): Promise<{ fingerprint: string; keep: boolean }> {
  const next = a.next(id, { fresh: false, why: 'bootstrap' });
  if (!next.ok) throw new Error(next.note);
  echo.pinnedTo.set(1000 + id, next.relay.fingerprint);
  const { keep } = await a.egressPinned(id, next.relay.fingerprint, { ...SOCKS, port: 1000 + id }, settling);
  return { fingerprint: next.relay.fingerprint, keep };
}

describe('what sites see: an IP-echo answer', () => {
  for (const [body, address] of [
    ['203.0.113.7\n', '203.0.113.7'],
    ['  203.0.113.7  ', '203.0.113.7'],
    ['2001:0DB8:0:0::1', '2001:db8::1'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['{"IsTor":true,"IP":"185.220.101.4"}', '185.220.101.4'],
    ['{"ip":"2a0b:f4c2::14"}', '2a0b:f4c2::14'],
    ['{"origin":"198.51.100.2"}', '198.51.100.2'],
  ] as const) {
    it(`reads ${JSON.stringify(body)} as ${address}`, () => {
      expect(readEgressAnswer(body)).to.deep.equal({ ok: true, address });
    });
  }

  for (const [name, body] of [
    ['an empty answer', ''],
    ['an HTML page', '<html><body>203.0.113.7</body></html>'],
    ['two addresses', '203.0.113.7, 198.51.100.2'],
    ['JSON naming two', '{"origin":"203.0.113.7, 198.51.100.2"}'],
    ['JSON without an address', '{"IsTor":true}'],
    ['JSON whose address is a number', '{"ip":3405803783}'],
    ['a JSON list', '["203.0.113.7"]'],
    ['broken JSON', '{"ip": "203.0.113.7"'],
    ['a zone index', 'fe80::1%eth0'],
    ['a leading zero', '203.000.113.7'],
    ['an answer too long', `${'x'.repeat(MAX_ECHO_ANSWER_BYTES)}1.2.3.4`],
  ] as const) {
    it(`refuses ${name}`, () => {
      const read = readEgressAnswer(body);
      expect(read.ok, JSON.stringify(read)).to.equal(false);
    });
  }

  it('property: any IPv4 address, bare or in JSON, reads back as itself', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.constantFrom('plain', 'IP', 'ip', 'address', 'origin'), (ip, form) => {
        const body = form === 'plain' ? `${ip}\n` : JSON.stringify({ [form]: ip });
        const read = readEgressAnswer(body);
        return read.ok && read.address === ip;
      }),
    );
  });

  it('property: any IPv6 address reads back in one canonical form, whatever its spelling', () => {
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        const a = readEgressAnswer(ip);
        const b = readEgressAnswer(ip.toUpperCase());
        return a.ok && b.ok && a.address === b.address && normaliseAddress(a.address) === a.address;
      }),
    );
  });

  it('property: any text is read or refused with a reason, never an exception', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.string({ unit: 'grapheme' })), (body) => {
        const read = readEgressAnswer(body);
        return read.ok ? normaliseAddress(read.address) === read.address : read.why.length > 0;
      }),
    );
  });
});

describe('what sites see: the Tor exit list (bulk exit-addresses)', () => {
  const LIST = [
    '@type tordnsel 1.0',
    'Downloaded 2024-05-01 13:10:00',
    `ExitNode ${fp('a')}`,
    'Published 2024-05-01 12:04:11',
    'LastStatus 2024-05-01 13:00:00',
    'ExitAddress 198.51.100.7 2024-05-01 11:00:00',
    'ExitAddress 198.51.100.8 2024-05-01 13:05:12',
    `ExitNode ${fp('b').toLowerCase()}`,
    'ExitAddress 203.0.113.9 2024-05-01 13:01:00',
    'ExitAddress not-an-address 2024-05-01 13:01:00',
    'ExitAddress 203.0.113.10 2024-02-30 13:01:00',
    'ExitNode short',
    'ExitAddress 192.0.2.1 2024-05-01 13:01:00',
    `ExitNode ${fp('c')}`,
    '',
  ].join('\n');

  it('reads every relay with its addresses, oldest first, and skips what it cannot read without losing the rest', () => {
    const list = parseExitList(LIST);
    expect([...list.entries.keys()]).to.deep.equal([fp('a'), fp('b')]);
    expect(list.entries.get(fp('a'))?.addresses).to.deep.equal([
      { address: '198.51.100.7', at: Date.UTC(2024, 4, 1, 11, 0, 0) },
      { address: '198.51.100.8', at: Date.UTC(2024, 4, 1, 13, 5, 12) },
    ]);
    expect(list.entries.get(fp('b'))?.addresses.map((a) => a.address)).to.deep.equal(['203.0.113.9']);
    // A malformed address, a date that does not exist, a malformed ExitNode and the address under it.
    expect(list.skippedLines).to.equal(4);
  });

  it('keeps the newest MAX_ADDRESSES_PER_EXIT addresses of a relay, and one entry per address', () => {
    const lines = [`ExitNode ${fp('a')}`];
    for (let i = 0; i < 20; i++) lines.push(`ExitAddress 198.51.100.${i} 2024-05-01 12:${String(i).padStart(2, '0')}:00`);
    lines.push('ExitAddress 198.51.100.19 2024-05-01 11:00:00');
    const addresses = parseExitList(lines.join('\n')).entries.get(fp('a'))?.addresses ?? [];
    expect(addresses).to.have.length(MAX_ADDRESSES_PER_EXIT);
    expect(addresses.at(-1)).to.deep.equal({ address: '198.51.100.19', at: Date.UTC(2024, 4, 1, 12, 19, 0) });
  });

  it('reads times as UTC and refuses ones that do not exist', () => {
    expect(parseListTime('2024-02-29', '23:59:59')).to.equal(Date.UTC(2024, 1, 29, 23, 59, 59));
    for (const [d, t] of [['2023-02-29', '00:00:00'], ['2024-05-01', '24:00:00'], ['2024-5-1', '00:00:00'], [undefined, undefined]] as const) expect(parseListTime(d, t)).to.equal(undefined);
  });

  it('property: a list written from any entries reads back as those entries', () => {
    const entry = fc.record({
      fingerprint: fc.stringMatching(/^[0-9A-F]{40}$/),
      addresses: fc.uniqueArray(fc.record({ address: fc.ipV4(), at: fc.integer({ min: 0, max: 4_000_000_000 }).map((s) => s * 1000) }), { minLength: 1, maxLength: MAX_ADDRESSES_PER_EXIT, selector: (a) => a.address }),
    });
    fc.assert(
      fc.property(fc.uniqueArray(entry, { maxLength: 20, selector: (e) => e.fingerprint }), (entries) => {
        const time = (ms: number): string => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
        const text = entries.map((e) => [`ExitNode ${e.fingerprint}`, 'Published 2024-05-01 00:00:00', ...e.addresses.map((a) => `ExitAddress ${a.address} ${time(a.at)}`)].join('\n')).join('\n');
        const read = parseExitList(text);
        return (
          read.skippedLines === 0 &&
          entries.every((e) => {
            const got = read.entries.get(e.fingerprint)?.addresses ?? [];
            const want = [...e.addresses].sort((x, y) => x.at - y.at);
            return got.length === want.length && want.every((w) => got.some((g) => g.address === w.address && g.at === w.at));
          })
        );
      }),
    );
  });

  it('property: any text is read without an exception, within its bounds', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string(), fc.constantFrom(`ExitNode ${fp('a')}`, 'ExitAddress 1.2.3.4 2024-05-01 00:00:00', 'ExitAddress ::1 2024-05-01 00:00:00'))), (lines) => {
        const read = parseExitList(lines.join('\n'));
        return [...read.entries.values()].every((e) => e.addresses.length > 0 && e.addresses.length <= MAX_ADDRESSES_PER_EXIT);
      }),
    );
  });
});

describe('what sites see: the egress book and the catalog', () => {
  it('believes the newest observation, whichever its source, and remembers every address seen', () => {
    const book = new EgressBook();
    expect(book.current(fp('a'))).to.equal(undefined);
    book.recordProbe(fp('a'), '198.51.100.1', 1000);
    expect(book.current(fp('a'))).to.deep.equal({ address: '198.51.100.1', source: 'probe', at: 1000 });
    book.replaceList(parseExitList(`ExitNode ${fp('a')}\nExitAddress 198.51.100.2 1970-01-01 00:00:02\n`));
    expect(book.current(fp('a'))?.source, 'a list entry newer than the probe').to.equal('exit_list');
    book.recordProbe(fp('a'), '198.51.100.1', 3000);
    expect(book.current(fp('a'))).to.deep.equal({ address: '198.51.100.1', source: 'probe', at: 3000 });
    expect(book.seen(fp('a'))).to.deep.equal(['198.51.100.2', '198.51.100.1']);
    book.keepOnly(new Set());
    expect(book.seen(fp('a'))).to.deep.equal([]);
    expect(book.current(fp('a'))?.source, 'the list is kept whole').to.equal('exit_list');
  });

  it('lays the egress over the published exit: address, /24 and GeoIP country are the egress address’s; the published one stays', async () => {
    const echo = new FakeEcho({});
    const { a } = assignments([published('a', '10.0.0.1', 'ca'), published('b', '10.1.0.1', 'us')], echo);
    a.catalog.egress.recordProbe(fp('a'), '10.1.0.7', 2000);
    await a.catalog.lookUpCountries(geoip({ '10.1.0.7': 'us' }), ['10.1.0.7']);
    a.catalog.overlayEgress();
    expect(a.catalog.get(fp('a'))).to.deep.include({ address: '10.1.0.7', block: '10.1.0.0/24', country: 'us', published: '10.0.0.1', addressSource: 'probe', measuredAt: 2000 });
    expect(a.catalog.get(fp('b'))).to.deep.include({ address: '10.1.0.1', country: 'us', published: '10.1.0.1', addressSource: 'published', measuredAt: null });
    // A refresh of the consensus keeps what was measured.
    a.catalog.replace([published('a', '10.0.0.1', 'ca'), published('b', '10.1.0.1', 'us')], 3000);
    expect(a.catalog.get(fp('a'))?.address).to.equal('10.1.0.7');
    // A relay that left the consensus takes its measurements with it.
    a.catalog.replace([published('b', '10.1.0.1', 'us')], 4000);
    expect(a.catalog.egress.seen(fp('a'))).to.deep.equal([]);
  });
});

describe('what sites see: probing', () => {
  it('tries the URLs in order until one answers with an address, within one deadline', async () => {
    const asked: string[] = [];
    const prober = new EgressProber(['http://a/ip', 'http://b/ip', 'http://c/ip'], 5_000, (f) => {
      asked.push(f.url);
      if (f.url === 'http://a/ip') return Promise.resolve({ ok: false, failure: 'http', socksReply: null, status: 503, detail: 'answered 503' });
      if (f.url === 'http://b/ip') return Promise.resolve({ ok: true, status: 200, body: '<html>' });
      return Promise.resolve(answer('198.51.100.4'));
    });
    expect(await prober.probe(SOCKS)).to.deep.include({ ok: true, address: '198.51.100.4', url: 'http://c/ip' });
    expect(asked).to.deep.equal(['http://a/ip', 'http://b/ip', 'http://c/ip']);
  });

  it('does not blame the exit when the instance itself does not answer, or no worker does', async () => {
    const dial = new EgressProber(['http://a/ip', 'http://b/ip'], 5_000, () => Promise.resolve({ ok: false, failure: 'dial', socksReply: null, status: null, detail: 'ECONNREFUSED' }));
    expect(await dial.probe(SOCKS)).to.deep.include({ ok: false, aboutExit: false, failure: 'dial' });
    const none = new EgressProber(['http://a/ip'], 5_000, () => Promise.resolve(null));
    expect(await none.probe(SOCKS)).to.deep.include({ ok: false, aboutExit: false, failure: 'no_worker' });
    const refused = new EgressProber(['http://a/ip'], 5_000, () => Promise.resolve({ ok: false, failure: 'socks', socksReply: 4, status: null, detail: 'host unreachable' }));
    expect(await refused.probe(SOCKS)).to.deep.include({ ok: false, aboutExit: true, failure: 'socks' });
  });

  it(`runs at most ${MAX_CONCURRENT_EGRESS_PROBES} at once; one that gets no turn within its deadline gives up without blaming the exit`, async () => {
    let running = 0;
    let most = 0;
    const release: (() => void)[] = [];
    const prober = new EgressProber(['http://a/ip'], 300, () => {
      running++;
      most = Math.max(most, running);
      return new Promise((resolve) =>
        release.push(() => {
          running--;
          resolve(answer('198.51.100.4'));
        }),
      );
    });
    const probes = Array.from({ length: MAX_CONCURRENT_EGRESS_PROBES + 2 }, () => prober.probe(SOCKS));
    const late = await probes[MAX_CONCURRENT_EGRESS_PROBES];
    expect(late).to.deep.include({ ok: false, aboutExit: false, failure: 'busy' });
    expect(most).to.equal(MAX_CONCURRENT_EGRESS_PROBES);
    for (const r of release.splice(0)) r();
    expect((await Promise.all(probes.slice(0, MAX_CONCURRENT_EGRESS_PROBES))).every((p) => p.ok)).to.equal(true);
  });
});

describe('what sites see: assignments by the egress address', () => {
  // a and c publish their own /24s, but c's traffic leaves from a's /24 (and country).
  const CATALOG = (): PublishedExit[] => [published('a', '10.0.0.1', 'us'), published('b', '10.1.0.1', 'se'), published('c', '10.2.0.1', 'jp')];

  it('measures a freshly pinned exit; exit_ip, /24 and country become the egress’s; a clash with no other exit free is kept as a shortage', async () => {
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1'), [fp('b')]: answer('10.1.0.1'), [fp('c')]: answer('10.0.0.9') });
    const { a, audit } = assignments(CATALOG(), echo);
    // The control ports a new address's country is looked up through (the catalog is read already).
    for (const id of [0, 1]) await a.ensureCatalog(id, geoip({ '10.0.0.9': 'us' }));
    // Instance 0 takes a; instance 1 is steered to c (its published /24 is free).
    const first = await pin(a, echo, 0);
    expect(first).to.deep.equal({ fingerprint: fp('a'), keep: true });
    const second = a.next(1, { fresh: false, why: 'bootstrap' });
    expect(second.ok && second.relay.fingerprint).to.equal(fp('b'));
    a.release(1);
    // Force c: b is banned for a moment.
    a.banAssigned(9, 'captcha', 'test', fp('b'));
    const third = await pin(a, echo, 1);
    expect(third).to.deep.equal({ fingerprint: fp('c'), keep: true }, 'no other exit would be distinct: a shortage, kept');
    expect(a.assignment(1)).to.deep.include({ address: '10.0.0.9', block: '10.0.0.0/24', country: 'us', published_address: '10.2.0.1', address_source: 'probe', distinct: false });
    expect(a.shortageOf(1)).to.match(/shares its \/24/);
    expect(a.egressOf(fp('c')), 'the GeoIP country of the egress address, not of the published one (jp)').to.deep.equal({ address: '10.0.0.9', country: 'us' });
    expect(audit.recent(20).some((e) => e.details.reason === 'egress_measured' && e.details.address === '10.0.0.9')).to.equal(true);
    // Pinned again within EGRESS_PROBE_TTL, nothing new is learnt: the choice stands, whatever else changed.
    a.liftBan(fp('b'));
    expect((await a.egressPinned(1, fp('c'), { ...SOCKS, port: 1001 }, true)).keep).to.equal(true);
  });

  it('chooses again before serving when the measured address clashes and another exit is free', async () => {
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1'), [fp('b')]: answer('10.1.0.1'), [fp('c')]: answer('10.0.0.9') });
    // c before b: judged by its published /24, c is the first free choice for instance 1.
    const [ca, cb, cc] = CATALOG() as [PublishedExit, PublishedExit, PublishedExit];
    const { a, audit } = assignments([ca, cc, cb], echo);
    expect((await pin(a, echo, 0)).fingerprint).to.equal(fp('a'));
    expect(await pin(a, echo, 1)).to.deep.equal({ fingerprint: fp('c'), keep: false });
    expect(audit.recent(20).some((e) => e.details.reason === 'egress_conflict' && e.instance === 1)).to.equal(true);
    const next = a.next(1, { fresh: true, why: 'egress' });
    expect(next.ok && next.relay.fingerprint).to.equal(fp('b'));
    expect(a.assignment(1)).to.deep.include({ distinct: true, block: '10.1.0.0/24' });
  });

  it('moves a serving instance whose exit turns out to share a /24 (exit-gone), and probes an exit only once per TTL', async () => {
    const now = { t: 1_000_000 };
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1'), [fp('c')]: answer('10.0.0.9') });
    const { a } = assignments([published('a', '10.0.0.1'), published('c', '10.2.0.1'), published('b', '10.1.0.1')], echo, { now });
    const gone: number[][] = [];
    a.on('exit-gone', (ids) => gone.push(ids));
    await pin(a, echo, 0, false);
    // Instance 1 is given c, as a rotation would (background measurement).
    a.banAssigned(9, 'captcha', 'test', fp('b'));
    const c = a.next(1, { fresh: false, why: 'api' });
    expect(c.ok && c.relay.fingerprint).to.equal(fp('c'));
    a.liftBan(fp('b'));
    echo.pinnedTo.set(1001, fp('c'));
    expect((await a.egressPinned(1, fp('c'), { ...SOCKS, port: 1001 }, false)).keep).to.equal(true);
    expect(gone).to.deep.equal([[1]]);
    const probes = echo.asked.length;
    await a.egressPinned(1, fp('c'), { ...SOCKS, port: 1001 }, false);
    expect(echo.asked.length, 'measured within EGRESS_PROBE_TTL: no probe').to.equal(probes);
    now.t += 3_600_000;
    await a.egressPinned(1, fp('c'), { ...SOCKS, port: 1001 }, false);
    expect(echo.asked.length, 'after the TTL: probed again').to.equal(probes + 1);
  });

  it('bans by fingerprint and by every address the exit was seen leaving from', async () => {
    const echo = new FakeEcho({ [fp('c')]: answer('10.0.0.9') });
    const { a } = assignments(CATALOG(), echo);
    a.catalog.egress.replaceList(parseExitList(`ExitNode ${fp('c')}\nExitAddress 10.5.0.5 1970-01-01 00:00:01\n`));
    a.catalog.egress.recordProbe(fp('c'), '10.0.0.9', 5000);
    a.catalog.overlayEgress();
    const ban = a.banAssigned(0, 'captcha', 'test', fp('c'));
    expect(ban).to.deep.include({ address: '10.0.0.9', seen: ['10.5.0.5'] });
    expect(a.bannedFor({ fingerprint: fp('z'), address: '10.5.0.5' }, []), 'an earlier address').to.equal(true);
    expect(a.bannedFor({ fingerprint: fp('z'), address: '10.0.0.9' }, []), 'the current one').to.equal(true);
    expect(a.bannedFor({ fingerprint: fp('z'), address: '10.2.0.1' }, []), 'its published address is not one sites saw').to.equal(false);
    const view = exitsViewOf(a, [], 6000);
    expect(view.bans[0]).to.deep.include({ address: '10.0.0.9', seen_addresses: ['10.5.0.5'] });
    expect(view.exits.find((e) => e.fingerprint === fp('c'))).to.deep.include({ published_address: '10.2.0.1', address: '10.0.0.9', address_source: 'probe', seen_addresses: ['10.5.0.5', '10.0.0.9'] });
  });

  it('reads an exit list from a file before the first choice, so the first choices are already distinct', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'exitpool-list-'));
    try {
      const file = path.join(dir, 'exit-addresses');
      await writeFile(file, `ExitNode ${fp('c')}\nExitAddress 10.0.0.9 2024-05-01 00:00:00\n`);
      const echo = new FakeEcho({});
      const { a } = assignments([], echo, { exitList: file });
      // c first: without the list, c (published 10.2.0.1) and a (10.0.0.1) would look distinct.
      const consensus = [CATALOG()[2], CATALOG()[0], CATALOG()[1]] as PublishedExit[];
      const identity = (hex: string): string => Buffer.from(hex, 'hex').toString('base64').replace(/=+$/, '');
      const ns = consensus.map((e) => `r ${e.nickname} ${identity(e.fingerprint)} ge3oVQks6xT1oVCYixQ9wofjjhA 2038-01-01 00:00:00 ${e.address} 9001 0\ns Exit Fast Running Stable Valid\nw Bandwidth=1000\n`).join('');
      const getInfo: GetInfo = (keys) => Promise.resolve(new Map(keys.map((k) => [k, k === 'ns/all' ? ns : k.startsWith('ip-to-country/10.0.0') ? 'us' : '??'])));
      await a.ensureCatalog(0, getInfo);
      expect(a.catalog.get(fp('c'))).to.deep.include({ address: '10.0.0.9', addressSource: 'exit_list', country: 'us', published: '10.2.0.1' });
      const chosen = [0, 1].map((id) => a.next(id, { fresh: false, why: 'bootstrap' }));
      const blocks = chosen.map((c) => (c.ok ? c.relay.block : ''));
      expect(new Set(blocks).size, blocks.join(' ')).to.equal(2);
      expect(exitsViewOf(a, [0, 1], 1).egress).to.deep.include({ probing: true, exit_list: true });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fetches an exit list named by URL through an instance, once one is pinned, and never from the host', async () => {
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1') });
    const LIST_URL = 'https://lists.testnet/exit-addresses';
    const listFetch = (f: EgressFetch): Promise<EgressFetchResult | null> =>
      f.url === LIST_URL ? Promise.resolve({ ok: true, status: 200, body: `ExitNode ${fp('c')}\nExitAddress 10.0.0.9 2024-05-01 00:00:00\n` }) : echo.fetch(f);
    const now = { t: 1_000_000 };
    const a = new ExitAssignments({
      unit: 'subnet',
      banTtlMs: 60_000,
      exitNodes: [],
      strictNodes: false,
      audit: new AuditLog(),
      log: logger(),
      now: () => now.t,
      random: () => 0,
      egress: { urls: ['http://whoami.testnet/ip'], ttlMs: 3_600_000, timeoutMs: 5_000, exitList: LIST_URL, fetch: listFetch },
    });
    a.catalog.replace(CATALOG(), now.t);
    expect(a.egress.listReadable(), 'no instance to fetch it through yet').to.equal(false);
    await pin(a, echo, 0);
    await a.refreshExitList();
    expect(a.catalog.get(fp('c'))).to.deep.include({ address: '10.0.0.9', addressSource: 'exit_list' });
    expect(echo.asked.map((f) => f.url).filter((u) => u === LIST_URL), 'the list is not an echo request').to.deep.equal([]);
  });

  it('a failed probe is evidence about the exit only when the echo service answered through another exit', async () => {
    const now = { t: 1_000_000 };
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1') });
    const { a } = assignments(CATALOG(), echo, { now });
    const evidence: EgressProbeFailure[] = [];
    a.on('egress-failed', (f) => evidence.push(f));
    // b fails first: nobody answered before, so the service may be down.
    a.banAssigned(9, 'captcha', 't', fp('a'));
    const b = await pin(a, echo, 1);
    expect(b.fingerprint).to.equal(fp('b'));
    expect(evidence.map((e) => e.echoAnswered)).to.deep.equal([false]);
    a.liftBan(fp('a'));
    await pin(a, echo, 0);
    now.t += EGRESS_PROBE_RETRY_MS;
    await a.egressPinned(1, fp('b'), { ...SOCKS, port: 1001 }, false);
    expect(evidence.map((e) => e.echoAnswered), 'a answered meanwhile: b is to blame').to.deep.equal([false, true]);
    expect(evidence[1]).to.deep.include({ instance: 1, fingerprint: fp('b'), failure: 'timeout' });
    // Not before EGRESS_PROBE_RETRY_MS, and no longer blamed once the service was silent for ECHO_ALIVE_MS.
    const asked = echo.asked.length;
    await a.egressPinned(1, fp('b'), { ...SOCKS, port: 1001 }, false);
    expect(echo.asked.length).to.equal(asked);
    now.t += ECHO_ALIVE_MS + 1;
    await a.egressPinned(1, fp('b'), { ...SOCKS, port: 1001 }, false);
    expect(evidence.map((e) => e.echoAnswered)).to.deep.equal([false, true, false]);
    // A SocksPort that does not answer is the tor process's, not the exit's: no evidence.
    echo.answers[fp('b')] = { ok: false, failure: 'dial', socksReply: null, status: null, detail: 'ECONNREFUSED' };
    now.t += EGRESS_PROBE_RETRY_MS;
    await a.egressPinned(1, fp('b'), { ...SOCKS, port: 1001 }, false);
    expect(evidence).to.have.length(3);
  });

  it('keeps a fleet’s units apart: /24s other nodes hold are avoided, held units are leased, a lost one moves its instances', async () => {
    const echo = new FakeEcho({ [fp('a')]: answer('10.0.0.1'), [fp('b')]: answer('10.1.0.1') });
    const { a } = assignments(CATALOG(), echo);
    a.setUnitsHeldElsewhere(new Map([['block:10.0.0.0/24', 'node-b']]));
    const first = a.next(0, { fresh: false, why: 'bootstrap' });
    expect(first.ok && first.relay.fingerprint, 'not in the /24 node-b holds').to.equal(fp('b'));
    expect(a.heldUnits()).to.deep.equal(new Map([['block:10.1.0.0/24', fp('b')]]));
    expect(a.distinctCapacity(), 'a /24 held elsewhere is no capacity here').to.equal(2);
    const gone: number[][] = [];
    a.on('exit-gone', (ids) => gone.push(ids));
    a.yieldUnit('block:10.1.0.0/24', 'node-c');
    expect(gone).to.deep.equal([[0]]);
    expect(a.unitHolderOf('block:10.1.0.0/24')).to.equal('node-c');
    const short = a.next(1, { fresh: false, why: 'bootstrap' });
    expect(short.ok && short.relay.fingerprint, 'only c is left distinct').to.equal(fp('c'));
    const shortage = a.next(2, { fresh: false, why: 'bootstrap' });
    expect(shortage).to.deep.include({ ok: true, distinct: false });
    expect(a.shortageOf(2)).to.match(/on this node or another of the fleet/);
    expect([...a.heldUnits().keys()], 'a shortage leases nothing').to.not.include('block:10.0.0.0/24');
  });
});
