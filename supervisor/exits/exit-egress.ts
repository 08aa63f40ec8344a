import { open } from 'node:fs/promises';
import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { GetInfo } from '../tor/relay-directory.js';
import type { ExitCatalog } from './exit-catalog.js';
import { MAX_EXIT_LIST_BYTES, parseExitList } from './exit-list.js';
import { EgressProber, type FetchThroughInstance, type ProbeOutcome, type ProbeRoute } from './egress-prober.js';

/** After a probe through an exit failed, it is not probed again for this long (it keeps the address it had). */
export const EGRESS_PROBE_RETRY_MS = 5 * 60_000;
/**
 * A failed probe counts against the exit only when the echo service answered through another
 * exit within this long: otherwise the service itself may be down, and no exit is to blame.
 */
export const ECHO_ALIVE_MS = 10 * 60_000;
/** The exit list (EXIT_LIST) is read again this often: the Tor Project's is regenerated about hourly. */
export const EXIT_LIST_REFRESH_MS = 60 * 60_000;
/** A list fetched through the pool has this long to arrive. */
const EXIT_LIST_FETCH_TIMEOUT_MS = 60_000;
/** Probe times kept for `probes_last_hour`: bounded however many probes run. */
const MAX_RECENT_PROBES = 10_000;
const HOUR_MS = 60 * 60_000;

export interface ExitEgressOptions {
  /** EGRESS_PROBE_URLS; empty: no probe. */
  urls: readonly string[];
  /** EGRESS_PROBE_TTL. */
  ttlMs: number;
  /** EGRESS_PROBE_TIMEOUT. */
  timeoutMs: number;
  /** EXIT_LIST: '', an http(s) URL or an absolute file path. */
  exitList: string;
  /** A proxy worker's GET through an instance (late-bound: the workers fork after the pool is built). */
  fetch: FetchThroughInstance;
}

/** A failed probe that is evidence about the exit (supervisor/verdicts weighs it). */
export interface EgressProbeFailure {
  instance: number;
  fingerprint: string;
  failure: string;
  detail: string;
  /** The echo service answered through another exit within ECHO_ALIVE_MS: the exit, not the service, failed. */
  echoAnswered: boolean;
  at: number;
}

/** What a pin's measurement came to. */
export type EgressMeasurement =
  | { kind: 'measured'; address: string; previous: string }
  | { kind: 'known' }
  | { kind: 'off' }
  | { kind: 'failed'; outcome: Extract<ProbeOutcome, { ok: false }> };

/** The probes' cost so far (GET /api/exits `egress`, docs/performance.md). */
export interface EgressProbeStats {
  probes: number;
  failed: number;
  lastHour: number;
  meanMs: number;
  maxMs: number;
}

/**
 * The addresses exits send their traffic from (README.md, "What sites see"): measured by a probe
 * through an instance pinned to the exit (at most one per exit at a time; again after
 * EGRESS_PROBE_TTL; after a failure not before EGRESS_PROBE_RETRY_MS), and read from a Tor exit
 * list. What it learns goes into the catalog's egress book and is laid over the catalog; the exit
 * assignments react to it (distinctness, the evidence of a failure).
 */
export class ExitEgress {
  private readonly prober: EgressProber;
  /** Each instance's SocksPort, as it was given at its last pin: the exit list is fetched through one. */
  private readonly routes = new Map<number, ProbeRoute>();
  private readonly inFlight = new Map<string, Promise<EgressMeasurement>>();
  /** The last probe that got an answer: whether the echo service works through other exits. */
  private lastAnswer: { at: number; fingerprint: string } | undefined;
  private listReadAt = 0;
  private listReading: Promise<string[]> | undefined;
  private readonly recent: number[] = [];
  private readonly totals = { probes: 0, failed: 0, totalMs: 0, maxMs: 0 };

  constructor(
    private readonly options: ExitEgressOptions,
    private readonly catalog: ExitCatalog,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {
    this.prober = new EgressProber(options.urls, options.timeoutMs, options.fetch);
  }

  get probing(): boolean {
    return this.prober.enabled;
  }

  /** Remembers the instance's SocksPort (a pin tells it); dropped when the instance leaves. */
  route(id: number, socks: ProbeRoute): void {
    this.routes.set(id, socks);
  }

  routeOf(id: number): ProbeRoute | undefined {
    return this.routes.get(id);
  }

  forget(id: number): void {
    this.routes.delete(id);
  }

  /** Whether the exit's address is due a probe: never measured, or longer ago than EGRESS_PROBE_TTL, and no failure within EGRESS_PROBE_RETRY_MS. */
  due(fingerprint: string, now = this.now()): boolean {
    if (!this.prober.enabled) return false;
    const book = this.catalog.egress;
    const probed = book.probedAt(fingerprint);
    const failed = book.failedAt(fingerprint);
    return (probed === undefined || now - probed >= this.options.ttlMs) && (failed === undefined || now - failed >= EGRESS_PROBE_RETRY_MS);
  }

  /**
   * Measures the exit through instance `id` (pinned to it) when it is due; one probe per exit at
   * a time (a second caller shares it). `getInfo` looks up the country of a new address.
   */
  measure(id: number, fingerprint: string, getInfo: GetInfo | undefined): Promise<EgressMeasurement> {
    if (!this.prober.enabled) return Promise.resolve({ kind: 'off' });
    const running = this.inFlight.get(fingerprint);
    if (running) return running;
    const route = this.routes.get(id);
    if (!route || !this.due(fingerprint)) return Promise.resolve({ kind: 'known' });
    const measuring = this.probeAndRecord(fingerprint, route, getInfo).finally(() => this.inFlight.delete(fingerprint));
    this.inFlight.set(fingerprint, measuring);
    return measuring;
  }

  /** A failure's evidence, as the verdicts weigh it. */
  failureEvidence(id: number, fingerprint: string, outcome: Extract<ProbeOutcome, { ok: false }>): EgressProbeFailure {
    const now = this.now();
    const echoAnswered = this.lastAnswer !== undefined && this.lastAnswer.fingerprint !== fingerprint && now - this.lastAnswer.at <= ECHO_ALIVE_MS;
    return { instance: id, fingerprint, failure: outcome.failure, detail: outcome.detail, echoAnswered, at: now };
  }

  private async probeAndRecord(fingerprint: string, route: ProbeRoute, getInfo: GetInfo | undefined): Promise<EgressMeasurement> {
    const outcome = await this.prober.probe(route);
    this.count(outcome);
    const now = this.now();
    if (!outcome.ok) {
      if (outcome.aboutExit) this.catalog.egress.recordFailure(fingerprint, now);
      this.log.debug('egress probe failed', { fingerprint, failure: outcome.failure, detail: outcome.detail, tookMs: outcome.tookMs });
      return { kind: 'failed', outcome };
    }
    this.lastAnswer = { at: now, fingerprint };
    const previous = this.catalog.get(fingerprint)?.address ?? '';
    this.catalog.egress.recordProbe(fingerprint, outcome.address, now);
    if (getInfo) {
      // The country of a new address, from tor's GeoIP database; unknown ('') if tor cannot say.
      await this.catalog.lookUpCountries(getInfo, [outcome.address]).catch((error: unknown) => this.log.debug('no country for a measured address', { address: outcome.address, error: errorMessage(error) }));
    }
    this.catalog.overlayEgress();
    this.log.debug('egress measured', { fingerprint, address: outcome.address, url: outcome.url, tookMs: outcome.tookMs });
    return { kind: 'measured', address: outcome.address, previous };
  }

  private count(outcome: ProbeOutcome): void {
    // Probes that never ran (no worker, no turn) cost nothing and are not counted.
    if (!outcome.ok && (outcome.failure === 'no_worker' || outcome.failure === 'busy')) return;
    this.totals.probes++;
    if (!outcome.ok) this.totals.failed++;
    this.totals.totalMs += outcome.tookMs;
    this.totals.maxMs = Math.max(this.totals.maxMs, outcome.tookMs);
    this.recent.push(this.now());
    if (this.recent.length > MAX_RECENT_PROBES) this.recent.splice(0, this.recent.length - MAX_RECENT_PROBES);
  }

  stats(): EgressProbeStats {
    const since = this.now() - HOUR_MS;
    while (this.recent.length > 0 && (this.recent[0] ?? 0) < since) this.recent.shift();
    const { probes, failed, totalMs, maxMs } = this.totals;
    return { probes, failed, lastHour: this.recent.length, meanMs: probes === 0 ? 0 : Math.round(totalMs / probes), maxMs };
  }

  // ---- the exit list ----

  /** Whether EXIT_LIST names a list and it is due a read (never read, or EXIT_LIST_REFRESH_MS ago). */
  listDue(now = this.now()): boolean {
    return this.options.exitList !== '' && (this.listReadAt === 0 || now - this.listReadAt >= EXIT_LIST_REFRESH_MS);
  }

  /** Whether the list can be read now: a file always; a URL once an instance can fetch it. */
  listReadable(): boolean {
    return this.options.exitList.startsWith('/') || this.routes.size > 0;
  }

  /**
   * Reads EXIT_LIST (one read at a time) and lays it over the catalog; resolves with the
   * fingerprints whose address changed. A list that cannot be read keeps the previous one.
   */
  readList(getInfo: GetInfo | undefined): Promise<string[]> {
    this.listReading ??= this.readListOnce(getInfo).finally(() => (this.listReading = undefined));
    return this.listReading;
  }

  private async readListOnce(getInfo: GetInfo | undefined): Promise<string[]> {
    const source = this.options.exitList;
    this.listReadAt = this.now();
    let text: string;
    try {
      text = source.startsWith('/') ? await readBoundedFile(source) : await this.fetchList(source);
    } catch (error) {
      this.log.warn('the exit list could not be read; keeping the last one', { source, error: errorMessage(error) });
      return [];
    }
    const list = parseExitList(text);
    const before = new Map(this.catalog.all().map((e) => [e.fingerprint, e.address]));
    this.catalog.egress.replaceList(list);
    if (getInfo) await this.catalog.lookUpCountries(getInfo, this.catalog.egress.addressesOf(before.keys())).catch(() => undefined);
    this.catalog.overlayEgress();
    const changed = this.catalog.all().filter((e) => before.get(e.fingerprint) !== e.address).map((e) => e.fingerprint);
    this.log.info('exit list read', { source, relays: list.entries.size, inCatalog: this.catalog.all().filter((e) => list.entries.has(e.fingerprint)).length, changed: changed.length, skippedLines: list.skippedLines });
    return changed;
  }

  private async fetchList(url: string): Promise<string> {
    // Through the newest route: the list's host learns an exit's address, never the pool's.
    const routes = [...this.routes.values()].reverse();
    for (const socks of routes) {
      const result = await this.options.fetch({ socks, url, timeoutMs: EXIT_LIST_FETCH_TIMEOUT_MS, maxBytes: MAX_EXIT_LIST_BYTES });
      if (result?.ok) return result.body;
      if (result && result.failure !== 'dial') throw new Error(`${result.failure}: ${result.detail}`);
    }
    throw new Error('no instance could fetch it');
  }
}

/** A file's text, refused when it is larger than MAX_EXIT_LIST_BYTES. */
async function readBoundedFile(file: string): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error('not a regular file');
    const size = stat.size;
    if (size > MAX_EXIT_LIST_BYTES) throw new Error(`${size} bytes, more than ${MAX_EXIT_LIST_BYTES}`);
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}
