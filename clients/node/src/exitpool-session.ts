import { fetch as undiciFetch, ProxyAgent, type RequestInit, type Response } from 'undici';
import { DEFAULT_BLOCK_RULES, detectBlock, type Block, type BlockRules } from './block-detection.js';
import { parseProxyStatus, ProxyRefusedError } from './proxy-refusal.js';
import { buildUsername, type SessionChoices } from './username.js';

export interface ExitpoolSessionOptions {
  /** The session key: the same key keeps the same exit until it is moved. */
  key: string;
  /** A proxy token (the password on the proxy ports, and the API's bearer for this session). */
  token: string;
  /** exitpool's HTTP proxy, e.g. `http://127.0.0.1:9251`. */
  proxy: string;
  /** exitpool's API, e.g. `http://127.0.0.1:8080`. */
  api: string;
  choices?: SessionChoices;
  rules?: BlockRules;
  /** Tries per `fetch`: the first, and one more after each block (reported, then rotated). Default 3. */
  attempts?: number;
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

/** Content types whose body the block rules read (pages and API answers, not downloads). */
const TEXTUAL = /^(text\/|application\/(json|xhtml\+xml|xml|javascript))/i;

/** Every try was blocked; the last response (the client's own object) is kept. */
export class StillBlockedError extends Error {
  constructor(
    readonly block: Block,
    readonly attempts: number,
    readonly response: unknown,
  ) {
    super(`still blocked after ${attempts} tries: ${block.kind} (${block.reason})`);
    this.name = 'StillBlockedError';
  }
}

/** An API call the client makes on the session's behalf failed. */
export class ExitpoolApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`exitpool API answered ${status}: ${body.trim().slice(0, 200)}`);
    this.name = 'ExitpoolApiError';
  }
}

/**
 * One exitpool session for `fetch` (undici): requests go through the HTTP proxy under the
 * session's username; a response that its rules call a block is reported to the pool (kind and
 * the site's domain), the session is rotated to a new exit, and the request is tried again, at
 * most `attempts` times. The exit the session leaves through is `exit` (from the proxy's
 * `Exitpool-Exit` header when the service sends it, else from the API).
 */
/** What a kept agent must offer: http.Agent and its kin close their sockets with destroy(). */
export interface Destroyable {
  destroy(): void;
}

export class ExitpoolSession {
  readonly key: string;
  readonly username: string;
  /** The exit IP last seen for this session ('' until known). */
  exit = '';
  private agent: ProxyAgent;
  private readonly kept = new Map<string, Promise<Destroyable>>();
  private readonly rules: BlockRules;
  private readonly attempts: number;

  constructor(private readonly o: ExitpoolSessionOptions) {
    this.key = o.key;
    this.username = buildUsername(o.key, o.choices);
    this.rules = o.rules ?? DEFAULT_BLOCK_RULES;
    this.attempts = Math.max(1, o.attempts ?? 3);
    this.agent = this.newAgent();
  }

  /** The session's proxy URLs, for clients this package does not wrap (credentials percent-encoded). */
  proxyUrl(scheme: 'http' | 'socks5h', socksAddress?: string): string {
    const cred = `${encodeURIComponent(this.username)}:${encodeURIComponent(this.o.token)}@`;
    if (scheme === 'http') {
      const proxy = new URL(this.o.proxy);
      return `${proxy.protocol}//${cred}${proxy.host}`;
    }
    if (socksAddress === undefined) throw new TypeError('the SOCKS5 address (host:port) is needed for a socks5h URL');
    return `socks5h://${cred}${socksAddress}`;
  }

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    return this.attempt(url, async () => {
      const response = await undiciFetch(url, { ...init, dispatcher: this.agent });
      const headers: Record<string, string> = {};
      response.headers.forEach((value, name) => (headers[name] = value));
      // The body rules read text; a download (an image, an archive) is not read twice.
      const body = TEXTUAL.test(headers['content-type'] ?? '') ? await response.clone().text() : '';
      // fetch shows only the final URL of the redirects it followed.
      return { status: response.status, headers, body, redirectedTo: response.redirected ? [response.url] : [], value: response };
    });
  }

  /**
   * The loop every client shares: `perform` sends the request (given the try's number) and
   * answers what the block rules read; a block is reported, the session rotated and `perform`
   * called again, `attempts` times in all. Returns what the last `perform` returned.
   */
  async attempt<T>(url: string | URL, perform: (attempt: number) => Promise<JudgedResponse<T>>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const r = await perform(attempt);
      const block = await this.judge(r, url);
      if (!block) return r.value;
      if (attempt >= this.attempts) throw new StillBlockedError(block, attempt, r.value);
      await this.rotate();
    }
  }

  /**
   * One response: a refusal by the proxy itself throws ProxyRefusedError; a block by the site is
   * reported (with the site's domain) and returned; a good response gives null.
   */
  async judge(r: Omit<JudgedResponse<unknown>, 'value'>, url: string | URL): Promise<Block | null> {
    const header = (name: string): string | null => {
      const v = r.headers[name.toLowerCase()];
      return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
    };
    const refusal = parseProxyStatus(header('proxy-status'));
    if (refusal && refusal.proxy === 'exitpool' && r.status >= 400) throw new ProxyRefusedError(r.status, refusal);
    const named = header('exitpool-exit');
    if (named) this.exit = named;
    const block = detectBlock({ status: r.status, headers: { get: header }, ...(r.redirectedTo ? { redirectedTo: r.redirectedTo } : {}) }, r.body, this.rules);
    if (block) await this.report(block, new URL(url).hostname);
    return block;
  }

  /** Tells the pool what the site did (exitpool cannot see inside TLS). */
  async report(block: Block, domain: string): Promise<void> {
    await this.api('POST', `/api/sessions/${encodeURIComponent(this.key)}/failure`, { kind: block.kind, reason: block.reason, domain });
  }

  /** Moves the session to a new exit; later requests open new connections through it. */
  async rotate(): Promise<void> {
    const r = (await this.api('POST', `/api/sessions/${encodeURIComponent(this.key)}/rotate`)) as { exit_ip: string };
    this.exit = r.exit_ip;
    const old = this.agent;
    this.agent = this.newAgent();
    this.dropKeptAgents();
    await old.close();
  }

  /**
   * An agent another client keeps for this session (got or axios over SOCKS5 or the HTTP proxy),
   * made on first use and reused, so that requests ride kept-alive connections as fetch's do.
   * A rotation drops them all: the next try opens new connections, which the pool routes to
   * the new exit.
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
    const view = (await this.api('GET', `/api/sessions/${encodeURIComponent(this.key)}`)) as { exit_ip: string };
    this.exit = view.exit_ip;
    return view.exit_ip;
  }

  /** The session's undici dispatcher, for `fetch(url, { dispatcher })` without the block handling (it changes on rotate). */
  get dispatcher(): ProxyAgent {
    return this.agent;
  }

  close(): Promise<void> {
    this.dropKeptAgents();
    return this.agent.close();
  }

  private newAgent(): ProxyAgent {
    // proxyTunnel false: http:// requests go to the proxy in absolute form, so its answer (and
    // the Exitpool-Exit header) reaches us; https:// is tunnelled with CONNECT as always.
    return new ProxyAgent({ uri: this.o.proxy, token: `Basic ${Buffer.from(`${this.username}:${this.o.token}`).toString('base64')}`, proxyTunnel: false });
  }

  private async api(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await undiciFetch(new URL(path, this.o.api), {
      method,
      headers: { Authorization: `Bearer ${this.o.token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new ExitpoolApiError(response.status, text);
    return text === '' ? null : (JSON.parse(text) as unknown);
  }
}
