import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { IP_SESSION_PREFIX, isAddressSessionKey, resolveSessionKey } from '../../shared/api/session-key.js';
import { parseSessionUsername, SessionUsernameError, sessionParamsTag, type SessionParams } from '../../shared/api/session-username.js';
import type { DefaultSessionMode } from '../../shared/config/index.js';
import type { OpenedRoute, RouteInvalidation, RouteParams, RouteResult } from '../../shared/ipc/protocol.js';
import type { RouteDecision, RouteGranted, Router, RouteRequest } from '../proxy/proxy-types.js';

/**
 * Usernames whose parsing is remembered (LeasedRouter.parse). A client fleet reuses its usernames
 * on every connection, so the split, the parameter regexes and the Map of a parse run once per
 * username instead of once per connection; the bound keeps a client that invents a username per
 * connection from growing it (the cache is emptied when it fills).
 */
export const PARSED_USERNAME_CACHE_MAX = 4096;

/** `tag`: sessionParamsTag of the parameters, '' without any. Shared by every connection of the username, so frozen. */
type ParsedUsername = { readonly ok: true; readonly key: string; readonly params: SessionParams | undefined; readonly tag: string };

/** A route the router cannot answer from what it holds: the supervisor is asked (or a request in flight waited for). */
class RouteToAsk {
  constructor(
    readonly key: string | null,
    readonly isNamed: boolean,
    readonly params: SessionParams | undefined,
    readonly tag: string,
  ) {}
}

export interface LeasedRouterOptions {
  /** The round trip to the supervisor's route(); rejects when it fails or times out. */
  ask(params: RouteParams): Promise<RouteResult>;
  defaultSession: DefaultSessionMode;
  /** USERNAME_PARAMS and SESSION_TTL_MAX: whether and within what the username carries session parameters. */
  usernameParams: boolean;
  sessionTtlMaxMs: number;
  /** A username refused for its parameters (logged at a bounded rate by the caller). */
  onBadUsername(detail: string, listener: string): void;
  /** A round trip's duration, for the IPC histogram. */
  onRoundTrip(ms: number): void;
  log: Logger;
}

/**
 * The proxy worker's router (docs/architecture.md, "Route leases"). A session's route comes
 * with a lease: the key's later connections reuse it with no round trip, and are reported to
 * the supervisor as opened routes (takeOpened(), with the accounting batch) so that its counts
 * stay exact. Connections of one key that arrive while its route is being asked for wait for
 * that answer instead of asking again (a burst on one session is one round trip). The
 * supervisor drops leases with `invalidate()` before the change that made them stale is
 * answered.
 *
 * An invalidation that arrives while a route request is out may concern that request's answer
 * (the channel is ordered, but both are delivered in one read): such an answer serves its one
 * connection and is not kept.
 */
export class LeasedRouter implements Router {
  /** By session key; `tag` is the parameters the lease was granted for (a change goes to the supervisor). */
  private readonly leases = new Map<string, RouteGranted & { session: number; tag: string }>();
  private readonly pending = new Map<string, Promise<RouteDecision>>();
  private opened: OpenedRoute[] = [];
  /** Counts invalidations applied: a route asked before the latest one is not leased. */
  private invalidations = 0;
  /** Usernames parsed without error, by username (PARSED_USERNAME_CACHE_MAX). */
  private readonly parsedUsernames = new Map<string, ParsedUsername>();

  constructor(private readonly o: LeasedRouterOptions) {}

  /**
   * The decision for `req` when the router has it already: a lease of the session (the
   * connection is counted as opened), or a refusal of the username. undefined when the
   * supervisor must be asked: call route(). Lets a listener dial in the same event-loop turn.
   */
  routeKnown(req: RouteRequest): RouteDecision | undefined {
    const resolved = this.resolve(req);
    return resolved instanceof RouteToAsk ? undefined : resolved;
  }

  async route(req: RouteRequest): Promise<RouteDecision> {
    const resolved = this.resolve(req);
    if (!(resolved instanceof RouteToAsk)) return resolved;
    const { key, isNamed, params, tag } = resolved;
    if (key === null) return this.ask(req, null, null, false, params);
    // A fresh exit per connection: the supervisor chooses each one, nothing is leased.
    if (params?.mode === 'rotating') return this.ask(req, null, key, isNamed, params);
    // resolve() found no lease that fits: wait for the key's request in flight, or ask.
    for (;;) {
      const inFlight = this.pending.get(key);
      if (inFlight === undefined) return this.askOnce(key, req, isNamed, params);
      const answer = await inFlight;
      // A refusal is the same for every connection that waited on it; a grant is used as a lease.
      if (!answer.ok) return answer;
      if (params !== undefined && this.leases.get(key)?.tag !== tag) return this.askOnce(key, req, isNamed, params);
      const lease = this.takeLease(key, params, tag);
      if (lease) return lease;
    }
  }

  /**
   * The session's lease when it fits, counted as an opened connection. A plain key uses whatever
   * lease its session has; other parameters are the supervisor's to apply.
   */
  private takeLease(key: string, params: SessionParams | undefined, tag: string): RouteGranted | undefined {
    const lease = this.leases.get(key);
    if (!lease || (params !== undefined && lease.tag !== tag)) return undefined;
    this.opened.push({ key, session: lease.session, instance: lease.instance });
    return lease;
  }

  /** What the router knows without waiting: a refusal, a lease (counted as opened), or what to ask the supervisor. */
  private resolve(req: RouteRequest): RouteDecision | RouteToAsk {
    let named = req.sessionKey;
    let params: SessionParams | undefined;
    let tag = '';
    if (named !== null && this.o.usernameParams && req.listener !== 'session-port') {
      const parsed = this.parse(named, req.listener);
      if (!parsed.ok) return parsed.refusal;
      named = parsed.key;
      params = parsed.params;
      tag = parsed.tag;
    }
    // An address's session (DEFAULT_SESSION=ip) belongs to that address: no username reaches another's.
    if (named !== null && req.listener !== 'session-port' && isAddressSessionKey(named) && named !== IP_SESSION_PREFIX + req.clientIp) {
      this.o.onBadUsername('an ip: session key names another address', req.listener);
      return { ok: false, reason: 'bad_session_params', detail: `session key: keys starting with ${IP_SESSION_PREFIX} are the sessions of client addresses (DEFAULT_SESSION=ip); name another key` };
    }
    // `named ??` first: a listener may make clientIp a lazy read, and a named key never needs it.
    const key = req.listener === 'session-port' ? null : (named ?? resolveSessionKey(null, req.clientIp, this.o.defaultSession));
    const lease = key !== null && params?.mode !== 'rotating' ? this.takeLease(key, params, tag) : undefined;
    return lease ?? new RouteToAsk(key, named !== null, params, tag);
  }

  private parse(username: string, listener: string): ParsedUsername | { ok: false; refusal: RouteDecision } {
    const known = this.parsedUsernames.get(username);
    if (known !== undefined) return known;
    try {
      const { key, params } = parseSessionUsername(username);
      if (params.lifetimeMs !== undefined && params.lifetimeMs > this.o.sessionTtlMaxMs) {
        throw new SessionUsernameError(`the lifetime asked for is longer than SESSION_TTL_MAX (${Math.round(this.o.sessionTtlMaxMs / 60_000)} minutes)`);
      }
      const some = Object.keys(params).length === 0 ? undefined : params;
      if (some?.countries) Object.freeze(some.countries);
      const parsed: ParsedUsername = Object.freeze({ ok: true as const, key, params: some === undefined ? undefined : Object.freeze(some), tag: some === undefined ? '' : sessionParamsTag(some) });
      if (this.parsedUsernames.size >= PARSED_USERNAME_CACHE_MAX) this.parsedUsernames.clear();
      this.parsedUsernames.set(username, parsed);
      return parsed;
    } catch (e) {
      if (!(e instanceof SessionUsernameError)) throw e;
      this.o.onBadUsername(e.message, listener);
      return { ok: false, refusal: { ok: false, reason: 'bad_session_params', detail: `session parameters: ${e.message}` } };
    }
  }

  /** Drops the leases of these keys and every lease on these instances; returns how many went. */
  invalidate(invalidation: RouteInvalidation): number {
    this.invalidations++;
    let dropped = 0;
    for (const key of invalidation.keys) if (this.leases.delete(key)) dropped++;
    if (invalidation.instances.length > 0) {
      for (const [key, lease] of this.leases) {
        if (!invalidation.instances.includes(lease.instance)) continue;
        this.leases.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  /** The connections routed with leases since the last call. */
  takeOpened(): OpenedRoute[] {
    const out = this.opened;
    this.opened = [];
    return out;
  }

  get leaseCount(): number {
    return this.leases.size;
  }

  private async askOnce(key: string, req: RouteRequest, named: boolean, params: SessionParams | undefined): Promise<RouteDecision> {
    const answer = this.ask(req, key, key, named, params);
    this.pending.set(key, answer);
    try {
      return await answer;
    } finally {
      if (this.pending.get(key) === answer) this.pending.delete(key);
    }
  }

  private async ask(req: RouteRequest, leaseKey: string | null, key: string | null, named: boolean, params: SessionParams | undefined): Promise<RouteDecision> {
    const started = performance.now();
    const invalidationsBefore = this.invalidations;
    let r: RouteResult;
    try {
      r = await this.o.ask({
        key,
        named,
        listener: req.listener,
        ...(req.instanceId === undefined ? {} : { instance: req.instanceId }),
        ...(params === undefined ? {} : { params }),
      });
    } catch (e) {
      this.o.log.warn('route request failed; refusing the connection', { error: errorMessage(e) });
      return { ok: false, reason: 'supervisor_unavailable' };
    }
    this.o.onRoundTrip(performance.now() - started);
    if (!r.ok) return r;
    const session = r.session;
    if (leaseKey !== null && r.lease && session !== null && r.key === leaseKey && this.invalidations === invalidationsBefore) {
      this.leases.set(leaseKey, { ...r, session, tag: params ? sessionParamsTag(params) : (this.leases.get(leaseKey)?.tag ?? '') });
    }
    return r;
  }
}
