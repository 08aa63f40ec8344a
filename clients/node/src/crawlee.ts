/**
 * `@exitpool/client/crawlee`: Crawlee on exitpool (needs `@crawlee/core`, which every Crawlee
 * crawler brings).
 */
import './node-version.js';
import { Session, type ProxyConfiguration, type ProxyConfigurationOptions, type SessionOptions, type SessionPool } from '@crawlee/core';
import type { Block } from './block-detection.js';
import { ProxyRefusedError, SocksReplyError } from './errors.js';
import { ExitpoolSession, type ExitpoolSessionOptions } from './exitpool-session.js';

export interface ExitpoolCrawleeOptions extends Omit<ExitpoolSessionOptions, 'key' | 'listener' | 'socks'> {
  /** The exitpool session key for a Crawlee session id; default `crawlee-<id>`. */
  keyFor?: (crawleeSessionId: string) => string;
}

/** What a Crawlee crawler's handler context offers that the block check reads. */
interface CrawlingContextLike {
  request: { url: string; loadedUrl?: string | undefined; id?: string | undefined; uniqueKey: string; noRetry: boolean };
  response?: { statusCode?: number | undefined; headers: Record<string, string | string[] | undefined> } | undefined;
  body?: string | Buffer | undefined;
  session?: { id: string } | undefined;
  proxyInfo?: { sessionId?: string | number | undefined } | undefined;
}

/** A Crawlee error handler, typed as loosely as Crawlee's own (context, error). */
export type CrawleeErrorHandler<C> = (ctx: C, error: Error) => Promise<void> | void;

/**
 * A refusal Crawlee met (it reports a refused CONNECT as an untyped "Proxy responded with 503")
 * is looked up on the service within this long: Crawlee calls its error handlers right after the
 * failure, and a refusal can take the service's COUNTRY_EXIT_WAIT_MS to be decided.
 */
export const CRAWLEE_REFUSAL_WINDOW_MS = 30_000;

/**
 * Crawlee's sessions' own options, which a session-creating function must pass on as the
 * default one does (`SessionPool` keeps them in a protected field: the pool's `maxAgeSecs`,
 * `maxUsageCount` and log).
 */
function poolSessionOptions(pool: SessionPool): SessionOptions {
  return (pool as unknown as { sessionOptions?: SessionOptions }).sessionOptions ?? {};
}

/**
 * Crawlee on exitpool: a ProxyConfiguration whose Crawlee sessions are exitpool sessions (each
 * Crawlee session id gets its own key, so its own sticky exit), a request-handler wrapper that
 * judges every page by the session's ban policy (a block is reported with its kind and domain,
 * the session moved to a new exit, and the request fails so that Crawlee retries it through the
 * same session, now on the new exit), and error handlers that turn the proxy's refusals, which
 * Crawlee only shows as untyped errors, into ProxyRefusedError (asking the service once). Crawlee's
 * own blocked-status handling is turned off in `crawlerOptions`, since the pool does it better:
 * retiring a Crawlee session would start a new key on any exit, the burnt one included. When
 * Crawlee retires or drops a session, its exitpool session is closed (with any connections it
 * kept) and forgotten.
 */
export class ExitpoolCrawlee {
  /** By exitpool key: the session and the Crawlee session ids using it. */
  private readonly sessions = new Map<string, { session: ExitpoolSession; ids: Set<string> }>();
  /** The Crawlee sessions this crawl created, to notice those the pool drops without retiring them (expired). */
  private readonly crawleeSessions = new Map<string, Session>();
  private readonly watchedPools = new WeakSet<SessionPool>();
  /** Typed refusals by request, for the failed-request handler (Crawlee passes its own error object). */
  private readonly refusals = new Map<string, ProxyRefusedError | SocksReplyError>();
  readonly proxyConfiguration: ProxyConfiguration;

  constructor(
    ProxyConfigurationClass: new (options: ProxyConfigurationOptions) => ProxyConfiguration,
    private readonly o: ExitpoolCrawleeOptions,
  ) {
    this.proxyConfiguration = new ProxyConfigurationClass({ newUrlFunction: (id) => this.sessionFor(String(id)).proxyUrl('http') });
  }

  /**
   * Options to spread into the crawler's: the proxy configuration, no blocked-status retirement,
   * sessions watched for retirement. (Add `errorHandler: pool.errors()` to type refusals before
   * each retry: Crawlee infers its context type from the handlers it is given, so this package
   * does not slip one in.)
   */
  get crawlerOptions(): {
    proxyConfiguration: ProxyConfiguration;
    useSessionPool: true;
    sessionPoolOptions: { blockedStatusCodes: number[]; createSessionFunction: (pool: SessionPool, options?: { sessionOptions?: SessionOptions }) => Session };
  } {
    return {
      proxyConfiguration: this.proxyConfiguration,
      useSessionPool: true,
      sessionPoolOptions: { blockedStatusCodes: [], createSessionFunction: (pool, options) => this.createSession(pool, options) },
    };
  }

  /** The exitpool session behind a Crawlee session id. */
  sessionFor(crawleeSessionId: string): ExitpoolSession {
    const key = this.o.keyFor?.(crawleeSessionId) ?? `crawlee-${crawleeSessionId}`;
    let entry = this.sessions.get(key);
    if (!entry) {
      entry = { session: new ExitpoolSession({ ...this.o, key }), ids: new Set() };
      this.sessions.set(key, entry);
    }
    entry.ids.add(crawleeSessionId);
    return entry.session;
  }

  /** How many exitpool sessions are open (one per key of a live Crawlee session). */
  get openSessions(): number {
    return this.sessions.size;
  }

  /** Wraps a request handler: blocked pages are reported and retried on a new exit before `handler` sees them. */
  wrap<C extends CrawlingContextLike>(handler: (ctx: C) => Promise<void> | void): (ctx: C) => Promise<void> {
    return async (ctx: C) => {
      const session = this.sessionFor(this.idOf(ctx));
      const generation = session.generation;
      const body = ctx.body === undefined ? '' : String(ctx.body);
      // Crawlee follows redirects: the page it loaded, when not the one asked for, is where they led.
      const loaded = ctx.request.loadedUrl;
      const redirectedTo = loaded !== undefined && new URL(loaded).href !== new URL(ctx.request.url).href ? [loaded] : [];
      const block: Block | null = session.judge({ status: ctx.response?.statusCode ?? 0, headers: ctx.response?.headers ?? {}, body, redirectedTo }, ctx.request.url);
      if (block) {
        // Crawlee retries the request (maxRequestRetries); the session is moved before it does.
        await session.afterBlock(block, generation, true, ctx.response);
        throw new Error(`blocked (${block.kind}: ${block.reason}); reported to exitpool and moved to exit ${session.exit || 'a new one'}, retrying`);
      }
      await handler(ctx);
    };
  }

  /**
   * An `errorHandler` (in `crawlerOptions`; wrap your own with it): a failure that was the
   * proxy's refusal is typed, and a refusal that waiting cannot help (no exit in the country)
   * is not retried. `handler` gets the typed error when there is one.
   */
  errors<C extends CrawlingContextLike>(handler?: CrawleeErrorHandler<C>): (ctx: C, error: Error) => Promise<void> {
    return async (ctx, error) => {
      const typed = await this.typedRefusal(ctx, error);
      if (typed !== undefined && !typed.retryable) ctx.request.noRetry = true;
      await handler?.(ctx, typed ?? error);
    };
  }

  /** A `failedRequestHandler` that gets the proxy's refusal typed (ProxyRefusedError) when the request failed on one. */
  failed<C extends CrawlingContextLike>(handler: CrawleeErrorHandler<C>): (ctx: C, error: Error) => Promise<void> {
    return async (ctx, error) => {
      const typed = this.refusals.get(this.requestKey(ctx)) ?? (await this.typedRefusal(ctx, error));
      this.refusals.delete(this.requestKey(ctx));
      await handler(ctx, typed ?? error);
    };
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    this.crawleeSessions.clear();
    await Promise.all(all.map((e) => e.session.close()));
  }

  /** The session-creating function the crawler's pool calls: it watches the pool for retirements, and drops the sessions it no longer has. */
  private createSession(pool: SessionPool, options?: { sessionOptions?: SessionOptions }): Session {
    if (!this.watchedPools.has(pool)) {
      this.watchedPools.add(pool);
      pool.on('sessionRetired', (s: Session) => this.release(s.id));
    }
    // A session that expired (maxAgeSecs) leaves the pool without being retired.
    for (const [id, s] of this.crawleeSessions) if (!s.isUsable()) this.release(id);
    const session = new Session({ ...poolSessionOptions(pool), ...options?.sessionOptions, sessionPool: pool });
    this.crawleeSessions.set(session.id, session);
    return session;
  }

  /** A Crawlee session is gone: its exitpool session is closed when no other Crawlee session uses its key. */
  private release(crawleeSessionId: string): void {
    this.crawleeSessions.delete(crawleeSessionId);
    for (const [key, entry] of this.sessions) {
      if (!entry.ids.delete(crawleeSessionId) || entry.ids.size > 0) continue;
      this.sessions.delete(key);
      void entry.session.close().catch(() => undefined);
    }
  }

  private async typedRefusal(ctx: CrawlingContextLike, error: Error): Promise<ProxyRefusedError | SocksReplyError | undefined> {
    const session = this.sessions.get(this.o.keyFor?.(this.idOf(ctx)) ?? `crawlee-${this.idOf(ctx)}`)?.session ?? this.sessionFor(this.idOf(ctx));
    const typed = await session.refusalBehind(error, CRAWLEE_REFUSAL_WINDOW_MS, 'http');
    if (!(typed instanceof ProxyRefusedError || typed instanceof SocksReplyError)) return undefined;
    this.refusals.set(this.requestKey(ctx), typed);
    return typed;
  }

  private idOf(ctx: CrawlingContextLike): string {
    return ctx.session?.id ?? String(ctx.proxyInfo?.sessionId ?? '');
  }

  private requestKey(ctx: CrawlingContextLike): string {
    return ctx.request.id ?? ctx.request.uniqueKey;
  }
}
