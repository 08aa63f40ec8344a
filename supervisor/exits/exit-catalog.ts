import { ControlCommandError } from '../tor/errors.js';
import type { GetInfo } from '../tor/relay-directory.js';
import { parseConsensusEntries, parseFamilyDeclaration, type ConsensusEntry, type FamilyDeclaration } from './consensus-entries.js';
import { EgressBook } from './egress-book.js';
import { addressBlock, asPublished, type ExitRelay, type PublishedExit } from './exit-relay.js';

/** GETINFO keys per command when fetching microdescriptors or countries: bounded replies. */
const KEYS_PER_COMMAND = 256;

/**
 * Families are read again from every relay's microdescriptor this often: a relay keeps its
 * fingerprint when its operator edits MyFamily, and only a new microdescriptor says so.
 */
export const FAMILY_REREAD_MS = 60 * 60_000;

/** A relay the pool may use as an exit: an Exit that is Running and Valid, and not a BadExit. */
export function isUsableExit(entry: Pick<ConsensusEntry, 'flags'>): boolean {
  const flags = new Set(entry.flags);
  return flags.has('Exit') && flags.has('Running') && flags.has('Valid') && !flags.has('BadExit');
}

/**
 * Families from the microdescriptors: two relays are one family when each lists the other (tor's
 * rule: a one-sided claim proves nothing) or both carry one family id. Returns fingerprint → the
 * smallest fingerprint of its family.
 */
export function familiesOf(fingerprints: readonly string[], declarations: ReadonlyMap<string, FamilyDeclaration>): Map<string, string> {
  const parent = new Map<string, string>(fingerprints.map((fp) => [fp, fp]));
  const find = (fp: string): string => {
    let root = fp;
    while (parent.get(root) !== root) root = parent.get(root) as string;
    parent.set(fp, root);
    return root;
  };
  const union = (a: string, b: string): void => {
    const ra = find(a);
    const rb = find(b);
    if (ra === rb) return;
    if (ra < rb) parent.set(rb, ra);
    else parent.set(ra, rb);
  };
  const byId = new Map<string, string>();
  for (const fp of fingerprints) {
    const declared = declarations.get(fp);
    if (!declared) continue;
    for (const member of declared.members) {
      if (member !== fp && parent.has(member) && declarations.get(member)?.members.includes(fp)) union(fp, member);
    }
    for (const id of declared.ids) {
      const first = byId.get(id);
      if (first === undefined) byId.set(id, fp);
      else union(first, fp);
    }
  }
  return new Map(fingerprints.map((fp) => [fp, find(fp)]));
}

export function buildExits(
  entries: readonly ConsensusEntry[],
  declarations: ReadonlyMap<string, FamilyDeclaration>,
  countries: ReadonlyMap<string, string>,
): PublishedExit[] {
  const usable = entries.filter(isUsableExit);
  const families = familiesOf(
    usable.map((e) => e.fingerprint),
    declarations,
  );
  return usable.map((e) => ({
    fingerprint: e.fingerprint,
    nickname: e.nickname,
    address: e.address,
    country: countries.get(e.address) ?? '',
    bandwidth: Math.max(1, e.bandwidth),
    block: addressBlock(e.address),
    family: families.get(e.fingerprint) ?? e.fingerprint,
  }));
}

/**
 * Every usable exit of the consensus the running instances use, read from one instance's control
 * port (`ns/all`, `md/id/…` for families, `ip-to-country/…`). Microdescriptors and countries
 * are cached between refreshes: only relays new to the consensus cost a lookup. Each exit is
 * judged by the address its traffic leaves from (`egress`: probes and the exit list, README.md
 * "What sites see"): its `address`, `block` and `country` are that address's.
 */
export class ExitCatalog {
  private exits: ExitRelay[] = [];
  private readonly byFingerprint = new Map<string, ExitRelay>();
  /** The exits as the consensus publishes them, so a new egress observation can be laid over them again. */
  private published: PublishedExit[] = [];
  private readonly declarations = new Map<string, FamilyDeclaration>();
  private readonly countries = new Map<string, string>();
  /** What is known of the addresses exits leave from. */
  readonly egress = new EgressBook();
  private refreshedAt = 0;
  private familiesReadAt = 0;

  all(): readonly ExitRelay[] {
    return this.exits;
  }

  get(fingerprint: string): ExitRelay | undefined {
    return this.byFingerprint.get(fingerprint);
  }

  get size(): number {
    return this.exits.length;
  }

  /** When the catalog was last read (ms since the epoch; 0 = never). */
  get updatedAt(): number {
    return this.refreshedAt;
  }

  /** Reads the consensus again; resolves with the fingerprints that left it. */
  async refresh(getInfo: GetInfo, now: number): Promise<string[]> {
    const consensus = await getInfo(['ns/all']);
    const entries = parseConsensusEntries(consensus.get('ns/all') ?? '');
    const usable = entries.filter(isUsableExit);
    if (this.declarations.size === 0 || now - this.familiesReadAt >= FAMILY_REREAD_MS) {
      this.declarations.clear();
      this.familiesReadAt = now;
    }
    const missingMd = usable.map((e) => e.fingerprint).filter((fp) => !this.declarations.has(fp));
    for (const keys of chunks(missingMd.map((fp) => `md/id/${fp}`))) {
      const answers = await getInfoAnswered(getInfo, keys);
      // A relay whose microdescriptor tor has not fetched yet stays uncached (its own family
      // meanwhile) and is asked again at the next refresh.
      for (const [key, md] of answers) this.declarations.set(key.slice('md/id/'.length), parseFamilyDeclaration(md));
    }
    await this.lookUpCountries(getInfo, [...usable.map((e) => e.address), ...this.egress.addressesOf(usable.map((e) => e.fingerprint))]);
    return this.replace(buildExits(usable, this.declarations, this.countries), now);
  }

  /**
   * The countries of `addresses` tor's GeoIP database gives (`GETINFO ip-to-country/…`), for
   * those not cached yet: the catalog's addresses, and the egress addresses measured or listed.
   */
  async lookUpCountries(getInfo: GetInfo, addresses: Iterable<string>): Promise<void> {
    const missing = [...new Set(addresses)].filter((a) => !this.countries.has(a));
    for (const keys of chunks(missing.map((a) => `ip-to-country/${a}`))) {
      const answers = await getInfoAnswered(getInfo, keys);
      for (const key of keys) {
        // An address tor cannot place (no GeoIP data) has no country: '' is cached as '??' is.
        const cc = (answers.get(key) ?? '').trim().toLowerCase();
        this.countries.set(key.slice('ip-to-country/'.length), /^[a-z]{2}$/.test(cc) && cc !== '??' ? cc : '');
      }
    }
  }

  /** Replaces the catalog (refresh, or tests); resolves with the fingerprints that left it. */
  replace(exits: readonly PublishedExit[], now: number): string[] {
    const next = new Set(exits.map((e) => e.fingerprint));
    const gone = [...this.byFingerprint.keys()].filter((fp) => !next.has(fp));
    this.published = [...exits];
    this.egress.keepOnly(next);
    this.overlayEgress();
    // Relays gone from the consensus: their cached lookups go too, so the caches stay bounded.
    for (const fp of [...this.declarations.keys()]) if (!next.has(fp)) this.declarations.delete(fp);
    const addresses = new Set([...exits.map((e) => e.address), ...this.egress.addressesOf(next)]);
    for (const a of [...this.countries.keys()]) if (!addresses.has(a)) this.countries.delete(a);
    this.refreshedAt = now;
    return gone;
  }

  /**
   * Lays what is known of each exit's egress over the published catalog again (after a probe or
   * an exit list): `address`, `block` and `country` become the egress address's. A country not
   * looked up yet (`lookUpCountries`) is '' meanwhile.
   */
  overlayEgress(): void {
    this.exits = this.published.map((p) => {
      const seen = this.egress.seen(p.fingerprint);
      const observed = this.egress.current(p.fingerprint);
      if (!observed) return asPublished(p, seen);
      const country = observed.address === p.address ? p.country : (this.countries.get(observed.address) ?? '');
      return { ...p, address: observed.address, block: addressBlock(observed.address), country, published: p.address, addressSource: observed.source, measuredAt: observed.at, seen };
    });
    this.byFingerprint.clear();
    for (const e of this.exits) this.byFingerprint.set(e.fingerprint, e);
  }
}

/**
 * The keys tor could answer. Tor fails a whole GETINFO when one key has no answer (552 for a
 * microdescriptor it has not downloaded yet, which on the real network is routine for relays new
 * to the consensus; 551 when it has no GeoIP data), so a failed batch is split in halves until the
 * keys without an answer stand alone and are left out: each missing key costs about two commands
 * per halving (log2 of the batch), and the rest of the catalog is still read.
 */
export async function getInfoAnswered(getInfo: GetInfo, keys: readonly string[]): Promise<Map<string, string>> {
  try {
    return await getInfo(keys);
  } catch (err) {
    if (!(err instanceof ControlCommandError) || (err.status !== 552 && err.status !== 551)) throw err;
    if (keys.length === 1) return new Map();
    const half = Math.ceil(keys.length / 2);
    const first = await getInfoAnswered(getInfo, keys.slice(0, half));
    const second = await getInfoAnswered(getInfo, keys.slice(half));
    return new Map([...first, ...second]);
  }
}

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += KEYS_PER_COMMAND) out.push(items.slice(i, i + KEYS_PER_COMMAND));
  return out;
}
