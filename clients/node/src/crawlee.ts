import type { ProxyConfiguration, ProxyConfigurationOptions } from '@crawlee/core';
import { ExitpoolSession, type ExitpoolSessionOptions } from './exitpool-session.js';

export interface ExitpoolCrawleeOptions extends Omit<ExitpoolSessionOptions, 'key'> {
  /** The exitpool session key for a Crawlee session id; default `crawlee-<id>`. */
  keyFor?: (crawleeSessionId: string) => string;
}

/** What a Crawlee crawler's handler context offers that the block check reads. */
interface CrawlingContextLike {
  request: { url: string; loadedUrl?: string | undefined };
  response: { statusCode?: number | undefined; headers: Record<string, string | string[] | undefined> };
  body?: string | Buffer | undefined;
  session?: { id: string } | undefined;
  proxyInfo?: { sessionId?: string | number | undefined } | undefined;
}

/**
 * Crawlee on exitpool: a ProxyConfiguration whose Crawlee sessions are exitpool sessions (each
 * Crawlee session id gets its own key, so its own sticky exit), and a request-handler wrapper
 * that judges every page by the session's block rules: a block is reported to the pool with its
 * kind and domain, the exitpool session is rotated to a new exit, and the request fails so that
 * Crawlee retries it (through the same session, now on the new exit). Crawlee's own
 * blocked-status handling is turned off in `crawlerOptions`, since the pool does it better:
 * retiring a Crawlee session would start a new key on any exit, the burnt one included.
 */
export class ExitpoolCrawlee {
  private readonly sessions = new Map<string, ExitpoolSession>();
  readonly proxyConfiguration: ProxyConfiguration;

  constructor(
    ProxyConfigurationClass: new (options: ProxyConfigurationOptions) => ProxyConfiguration,
    private readonly o: ExitpoolCrawleeOptions,
  ) {
    this.proxyConfiguration = new ProxyConfigurationClass({ newUrlFunction: (id) => this.sessionFor(String(id)).proxyUrl('http') });
  }

  /** Options to spread into the crawler's: the proxy configuration, and no blocked-status retirement. */
  get crawlerOptions(): { proxyConfiguration: ProxyConfiguration; useSessionPool: true; sessionPoolOptions: { blockedStatusCodes: number[] } } {
    return { proxyConfiguration: this.proxyConfiguration, useSessionPool: true, sessionPoolOptions: { blockedStatusCodes: [] } };
  }

  /** The exitpool session behind a Crawlee session id. */
  sessionFor(crawleeSessionId: string): ExitpoolSession {
    const key = this.o.keyFor?.(crawleeSessionId) ?? `crawlee-${crawleeSessionId}`;
    let s = this.sessions.get(key);
    if (!s) {
      s = new ExitpoolSession({ ...this.o, key });
      this.sessions.set(key, s);
    }
    return s;
  }

  /** Wraps a request handler: blocked pages are reported and retried on a new exit before `handler` sees them. */
  wrap<C extends CrawlingContextLike>(handler: (ctx: C) => Promise<void> | void): (ctx: C) => Promise<void> {
    return async (ctx: C) => {
      const id = ctx.session?.id ?? String(ctx.proxyInfo?.sessionId ?? '');
      const session = this.sessionFor(id);
      const body = ctx.body === undefined ? '' : String(ctx.body);
      // Crawlee follows redirects: the page it loaded, when not the one asked for, is where they led.
      const loaded = ctx.request.loadedUrl;
      const redirectedTo = loaded !== undefined && new URL(loaded).href !== new URL(ctx.request.url).href ? [loaded] : [];
      const block = await session.judge({ status: ctx.response.statusCode ?? 0, headers: ctx.response.headers, body, redirectedTo }, loaded ?? ctx.request.url);
      if (block) {
        await session.rotate();
        throw new Error(`blocked (${block.kind}: ${block.reason}); reported to exitpool and moved to exit ${session.exit}, retrying`);
      }
      await handler(ctx);
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.close()));
  }
}
