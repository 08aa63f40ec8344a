import { routeRefusalView, type SessionRefusalView } from '../../shared/api/route-refusal.js';
import type { RouteRefusal, RouteResult } from '../../shared/ipc/protocol.js';

/** How long a session's last route refusal is kept for `GET /api/sessions/{key}/refusal`. */
export const RECENT_REFUSAL_TTL_MS = 60_000;
/** At most this many keys' refusals are kept; the oldest make room (a flood of refused keys costs memory only up to here). */
export const RECENT_REFUSALS_MAX = 10_000;

export interface RecentRefusal {
  reason: RouteRefusal;
  detail: string | undefined;
  /** When it was refused (the supervisor's clock). */
  at: number;
}

/**
 * The last route the supervisor refused for each session key, briefly: a client whose library
 * hides the proxy's refusal (a CONNECT refused with a bare "503", a SOCKS5 reply without its
 * code) asks the API once, right after its request failed (docs/api.md, "GET
 * /api/sessions/{key}/refusal"). Bounded in time (RECENT_REFUSAL_TTL_MS) and in keys
 * (RECENT_REFUSALS_MAX, oldest out first: a Map keeps insertion order, and a key refused again
 * is moved to the end). Refusals the proxy worker decides alone (a malformed username, its own
 * connection limit, a supervisor that does not answer) never reach here.
 */
export class RecentRefusals {
  private readonly byKey = new Map<string, RecentRefusal>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly ttlMs = RECENT_REFUSAL_TTL_MS,
    private readonly max = RECENT_REFUSALS_MAX,
  ) {}

  /** Records `result` when it is a refusal of a named key, and hands it on unchanged (sync or not). */
  note<R extends RouteResult | Promise<RouteResult>>(key: string | null, result: R): R {
    if (key === null) return result;
    if (result instanceof Promise) {
      void result.then((r) => this.record(key, r), () => undefined);
      return result;
    }
    this.record(key, result as RouteResult);
    return result;
  }

  /** The key's last refusal within the TTL, or undefined. */
  get(key: string): RecentRefusal | undefined {
    const r = this.byKey.get(key);
    if (r === undefined) return undefined;
    if (this.now() - r.at > this.ttlMs) {
      this.byKey.delete(key);
      return undefined;
    }
    return r;
  }

  /** The API's answer for the key (GET /api/sessions/{key}/refusal): its last refusal with its age, or none. */
  view(key: string): SessionRefusalView {
    const r = this.get(key);
    return { session: key, refusal: r === undefined ? null : routeRefusalView(r.reason, r.detail, r.at, this.now() - r.at) };
  }

  get size(): number {
    return this.byKey.size;
  }

  private record(key: string, result: RouteResult): void {
    if (result.ok) return;
    this.byKey.delete(key);
    this.byKey.set(key, { reason: result.reason, detail: result.detail, at: this.now() });
    if (this.byKey.size > this.max) {
      const oldest = this.byKey.keys().next().value as string;
      this.byKey.delete(oldest);
    }
  }
}
