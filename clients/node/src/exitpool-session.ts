import { fetch as undiciFetch, ProxyAgent, Socks5ProxyAgent, errors as undiciErrors, type Dispatcher, type RequestInit, type Response } from 'undici';
import { banPolicyOf, defaultBanPolicy, type BanPolicy, type Block, type BlockRules } from './block-detection.js';
import { NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError } from './errors.js';
import { ExitpoolApi, type FailureAnswer, type RotateAnswer } from './exitpool-api.js';
import { EXITPOOL_PROXY_NAME, parseProxyStatus } from './proxy-status.js';
import { reportDomain } from './report-domain.js';
import { buildUsername, type SessionChoices } from './username.js';

/** Which of exitpool's listeners a request goes through. */
export type Listener = 'http' | 'socks5';

export interface ExitpoolSessionOptions {
  /** The session key: the same key keeps the same exit until it is moved. */
  key: string;
  /** A proxy token (the password on the proxy ports, and the API's bearer for this session). */
  token: string;
  /** exitpool's HTTP proxy, e.g. `http://127.0.0.1:9251`. */
  proxy: string;
  /** exitpool's API, e.g. `http://127.0.0.1:8080`. */
  api: string;
  /** exitpool's SOCKS5 listener (`host:port`), for `listener: 'socks5'`. */
  socks?: string;
  /** Which listener `fetch` goes through: the HTTP proxy (default) or SOCKS5 (undici's Socks5ProxyAgent, experimental in undici). */
  listener?: Listener;
  choices?: SessionChoices;
  /** Rules for the default ban policy (DEFAULT_BLOCK_RULES); ignored when `banPolicy` is given. */
  rules?: BlockRules;
  /** Whether a response is a block, and what kind (defaultBanPolicy). */
  banPolicy?: BanPolicy;
  /** Tries per request: the first, and one more after each block (reported, then moved). Default 3. */
  attempts?: number;
  /** Called with the error when a failure report could not be sent; the request loop goes on regardless. */
  onReportFailed?: (error: unknown) => void;
}

/** What the block rules read of a response, whichever client got it. */
export interface JudgedResponse<T> {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Where followed redirects led, the final URL last (JudgedHead.redirectedTo). */
  redirectedTo?: readonly string[];
  /** What the caller gets back (the client's own response object). */
  value: T;
}

/** What an already-closed kept agent must offer: http.Agent and its kin close their sockets with destroy(). */
export interface Destroyable {
  destroy(): void;
}

/** Content types whose body the ban policy reads (pages and API answers, not downloads). */
const TEXTUAL = /^(text\/|application\/(json|xhtml\+xml|xml|javascript)|[a-z]+\/[a-z.+-]*\+(json|xml))/i;

/**
 * A refusal the service reports is this request's when it is no older than the request, give or
 * take this much (the two clocks only need to run at the same rate: the answer's `age_ms` is
 * compared with the time since the request left).
 */
const REFUSAL_CLOCK_SLACK_MS = 250;

const SOCKS_REPLY_CODE = /^UND_ERR_SOCKS5_REPLY_(\d+)$/;

/**
 * One block event: blocks met on one exit of the session while its report (and the move after
 * it) is in flight. Reported once; closed when its report is done and nobody asked for a move,
 * so that a later block on the same exit is an event of its own.
 */
interface BlockEvent {
  generation: number;
  /** Resolves once the report was sent (or failed) and, when the pool moved the session, once that was taken in. */
  reported: Promise<void>;
  /** The move after it, once someone asked for another try. */
  moved?: Promise<void>;
  closed: boolean;
}

/**
 * One exitpool session for `fetch` (undici): requests go through the HTTP proxy (or SOCKS5)
 * under the session's username; a response its ban policy calls a block is reported to the pool
 * (kind and the site's domain), the session is moved to a new exit (by the pool on the report,
 * or by a rotation), and the request is tried again, at most `attempts` times. A move that finds
 * no new exit stops the loop with NoFreshExitError. The exit the session leaves through is
 * `exit` (from the proxy's `Exitpool-Exit` header when the service sends it, else from the API).
 */
export class ExitpoolSession {
  readonly key: string;
  readonly username: string;
  /** The exit IP last seen for this session ('' until known). */
  exit = '';
  /** The client's own notion of the session's exit: goes up each time the session moves, so requests can tell which exit they met a block on. */
  private exitGeneration = 0;
  private agent: Dispatcher | null = null;
  private readonly kept = new Map<string, Promise<Destroyable>>();
  private readonly policy: BanPolicy;
  private readonly attempts: number;
  private readonly listener: Listener;
  private readonly api: ExitpoolApi;
  private event: BlockEvent | null = null;

  constructor(private readonly o: ExitpoolSessionOptions) {
    this.key = o.key;
    this.username = buildUsername(o.key, o.choices);
    this.policy = o.banPolicy ?? (o.rules ? banPolicyOf(o.rules) : defaultBanPolicy);
    this.attempts = Math.max(1, o.attempts ?? 3);
    this.listener = o.listener ?? 'http';
    if (this.listener === 'socks5' && o.socks === undefined) throw new TypeError("listener 'socks5' needs the SOCKS5 address (socks: 'host:port')");
    this.api = new ExitpoolApi(o.api, o.token);
  }

  /** The session's proxy URLs, for clients this package does not wrap (credentials percent-encoded). */
  proxyUrl(scheme: 'http' | 'socks5h' | 'socks5', socksAddress?: string): string {
    const cred = `${encodeURIComponent(this.username)}:${encodeURIComponent(this.o.token)}@`;
    if (scheme === 'http') {
      const proxy = new URL(this.o.proxy);
      return `${proxy.protocol}//${cred}${proxy.host}`;
    }
    const address = socksAddress ?? this.o.socks;
    if (address === undefined) throw new TypeError('the SOCKS5 address (host:port) is needed for a socks5 URL');
    return `${scheme}://${cred}${address}`;
  }

  /** Goes up each time the session moves to another exit (a report the pool acted on, a rotation). */
  get generation(): number {
    return this.exitGeneration;
  }

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    return this.attempt(
      url,
      async () => {
        const response = await undiciFetch(url, { ...init, dispatcher: this.dispatcher });
        const headers: Record<string, string> = {};
        response.headers.forEach((value, name) => (headers[name] = value));
        // The ban policy reads text; a download (an image, an archive) is not read twice.
        const body = TEXTUAL.test(headers['content-type'] ?? '') ? await response.clone().text() : '';
        // fetch shows only the final URL of the redirects it followed.
        return { status: response.status, headers, body, redirectedTo: response.redirected ? [response.url] : [], value: response };
      },
      this.listener,
    );
  }

  /**
   * The loop every client shares: `perform` sends the request (given the try's number) and
   * answers what the ban policy reads; a block is reported, the session moved and `perform`
   * called again, `attempts` times in all. Returns what the last `perform` returned. A request
   * that fails without an answer is checked against the service's record of refusals
   * (`listener`: which listener it went through) and thrown as ProxyRefusedError or
   * SocksReplyError when the proxy refused it, else as it was.
   */
  async attempt<T>(url: string | URL, perform: (attempt: number) => Promise<JudgedResponse<T>>, listener: Listener = 'http'): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const generation = this.exitGeneration;
      const sentAt = Date.now();
      let r: JudgedResponse<T>;
      try {
        r = await perform(attempt);
      } catch (error) {
        throw await this.refusalBehind(error, Date.now() - sentAt, listener);
      }
      const leftFrom = this.exit;
      const block = this.judge(r, url);
      if (!block) return r.value;
      const again = attempt < this.attempts;
      await this.afterBlock(block, generation, again, r.value, leftFrom);
      if (!again) throw new StillBlockedError(block, attempt, r.value);
    }
  }

  /**
   * One response: a refusal by the proxy itself throws ProxyRefusedError; a block (by the ban
   * policy) is returned, its `site` set to where it came from; a good response gives null.
   */
  judge(r: Omit<JudgedResponse<unknown>, 'value'>, url: string | URL): Block | null {
    const header = (name: string): string | null => {
      const v = r.headers[name.toLowerCase()];
      return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
    };
    const refusal = parseProxyStatus(header('proxy-status'), EXITPOOL_PROXY_NAME);
    if (refusal && r.status >= 400) throw new ProxyRefusedError(r.status, refusal);
    const named = header('exitpool-exit');
    if (named) this.exit = named;
    const asked = String(url);
    const block = this.policy({ status: r.status, headers: { get: header }, body: r.body, url: asked, redirectedTo: r.redirectedTo ?? [] });
    return block === null ? null : { ...block, site: block.site ?? (r.redirectedTo ?? []).at(-1) ?? asked };
  }

  /**
   * What follows a block met on exit `generation`: it is reported once (concurrent requests that
   * met the same block on the same exit join that report), and when another try follows
   * (`tryAgain`), the session is moved once: by the pool itself when the report's answer says
   * so (`moved`), else by a rotation. A request whose exit already changed since it left just
   * tries again. A move to an exit that is not new (`new_exit: false`, or the exit just left)
   * throws NoFreshExitError.
   */
  async afterBlock(block: Block, generation: number, tryAgain: boolean, response: unknown, leftFrom = this.exit): Promise<void> {
    if (generation !== this.exitGeneration) return;
    let event = this.event;
    if (event === null || event.generation !== generation || event.closed) {
      event = { generation, reported: this.reportAndTakeMove(block, generation, response), closed: false };
      this.event = event;
    }
    await event.reported;
    if (!tryAgain || generation !== this.exitGeneration) {
      if (event.moved === undefined) event.closed = true;
      return;
    }
    event.moved ??= this.rotateAfter(block, generation, response, leftFrom);
    await event.moved;
  }

  private async reportAndTakeMove(block: Block, generation: number, response: unknown): Promise<void> {
    const answer = await this.report(block);
    if (answer?.moved !== true || generation !== this.exitGeneration) return;
    this.movedTo(answer.exit_ip ?? '');
    if (answer.new_exit === false) throw new NoFreshExitError(answer.exit_note ?? '', this.exit, block, response);
  }

  private async rotateAfter(block: Block, generation: number, response: unknown, leftFrom: string): Promise<void> {
    if (generation !== this.exitGeneration) return;
    const r = await this.rotate();
    if (r.new_exit === false || (leftFrom !== '' && r.exit_ip === leftFrom)) throw new NoFreshExitError(r.exit_note || `still on ${r.exit_ip}`, r.exit_ip, block, response);
  }

  /**
   * Tells the pool what the site did (exitpool cannot see inside TLS), naming the site's domain
   * when the API can take it. A report that fails is passed to `onReportFailed` and answers
   * undefined: it never stops the request loop.
   */
  async report(block: Block): Promise<FailureAnswer | undefined> {
    const domain = reportDomain(block.site);
    try {
      return await this.api.report(this.key, { kind: block.kind, reason: block.reason, ...(domain === undefined ? {} : { domain }) });
    } catch (error) {
      this.o.onReportFailed?.(error);
      return undefined;
    }
  }

  /** Moves the session to a new exit; later requests open new connections through it. */
  async rotate(): Promise<RotateAnswer> {
    const r = await this.api.rotate(this.key);
    this.movedTo(r.exit_ip);
    return r;
  }

  /** The session is on another exit now: connections kept to the old one are dropped. */
  private movedTo(exitIp: string): void {
    this.exitGeneration++;
    this.exit = exitIp;
    const old = this.agent;
    this.agent = null;
    this.dropKeptAgents();
    void old?.close().catch(() => undefined);
  }

  /**
   * Why a request failed without an answer: the proxy's refusal when the service recorded one
   * for this session since the request left (`GET /api/sessions/{key}/refusal`, asked once), as
   * ProxyRefusedError (HTTP proxy) or SocksReplyError (SOCKS5); else `error` itself. A SOCKS5
   * reply code the library names is used as it is.
   */
  async refusalBehind(error: unknown, elapsedMs: number, listener: Listener): Promise<unknown> {
    if (error instanceof ProxyRefusedError || error instanceof SocksReplyError) return error;
    const socksCode = socksReplyCodeOf(error);
    let answer;
    try {
      answer = await this.api.refusal(this.key);
    } catch {
      return socksCode === undefined ? error : new SocksReplyError(socksCode);
    }
    const r = answer.refusal;
    if (r === null || r.age_ms > elapsedMs + REFUSAL_CLOCK_SLACK_MS) return socksCode === undefined ? error : new SocksReplyError(socksCode);
    if (listener === 'socks5') return new SocksReplyError(socksCode ?? r.socks_reply, r.reason, r.detail);
    return new ProxyRefusedError(r.http_status, { proxy: EXITPOOL_PROXY_NAME, error: r.proxy_status_error, details: r.detail }, r.reason, 'service');
  }

  /**
   * An agent another client keeps for this session (got or axios over SOCKS5 or the HTTP proxy),
   * made on first use and reused, so that requests ride kept-alive connections as fetch's do.
   * A move drops them all: the next try opens new connections, which the pool routes to the new
   * exit.
   */
  keptAgent<T extends Destroyable>(name: string, make: () => Promise<T>): Promise<T> {
    let agent = this.kept.get(name);
    if (agent === undefined) {
      agent = make();
      this.kept.set(name, agent);
      // A failed make is not kept: the next request tries again.
      agent.catch(() => this.kept.get(name) === agent && this.kept.delete(name));
    }
    return agent as Promise<T>;
  }

  private dropKeptAgents(): void {
    for (const agent of this.kept.values()) agent.then((a) => a.destroy(), () => undefined);
    this.kept.clear();
  }

  /** Reads the session's exit from the pool. */
  async currentExit(): Promise<string> {
    const view = await this.api.session(this.key);
    this.exit = view.exit_ip;
    return view.exit_ip;
  }

  /**
   * The session's undici dispatcher, for `fetch(url, { dispatcher })` without the block handling
   * (it changes when the session moves). Made on first use: a session used only through another
   * client (got, axios, Crawlee) holds none.
   */
  get dispatcher(): Dispatcher {
    this.agent ??= this.newAgent();
    return this.agent;
  }

  /** Closes every connection the session keeps. */
  async close(): Promise<void> {
    this.dropKeptAgents();
    const agent = this.agent;
    this.agent = null;
    await agent?.close();
  }

  private newAgent(): Dispatcher {
    if (this.listener === 'socks5') {
      // Names are resolved by the exit (the SOCKS5 request carries the host name).
      return new Socks5ProxyAgent(this.proxyUrl('socks5'), { connectTimeout: SOCKS_CONNECT_TIMEOUT_MS });
    }
    // proxyTunnel false: http:// requests go to the proxy in absolute form, so its answer (and
    // the Exitpool-Exit header) reaches us; https:// is tunnelled with CONNECT as always.
    return new ProxyAgent({ uri: this.o.proxy, token: `Basic ${Buffer.from(`${this.username}:${this.o.token}`).toString('base64')}`, proxyTunnel: false });
  }
}

/**
 * How long undici's SOCKS5 agent waits for the proxy's reply: a country no instance serves yet
 * is given an exit first, within the service's COUNTRY_EXIT_WAIT_MS.
 */
const SOCKS_CONNECT_TIMEOUT_MS = 30_000;

/** The SOCKS5 reply code behind an undici error (its Socks5ProxyError codes are typed), or undefined. */
function socksReplyCodeOf(error: unknown): number | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof undiciErrors.UndiciError) {
      const m = SOCKS_REPLY_CODE.exec((e as { code?: string }).code ?? '');
      if (m) return Number(m[1]);
    }
  }
  return undefined;
}
