import type { Redis } from 'ioredis';
import type { Logger } from '../../shared/logger.js';
import type { FleetChannels } from './fleet-channels.js';
import { AuthFileShapeError, isTokenId, MAX_STORED_TOKENS, parseStoredToken, type StoredToken } from '../auth/auth-file.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/** What the fleet's tokens need of this node's credential store (the service wires AuthStore and the push to the workers). */
export interface FleetTokenStore {
  /** The issued tokens auth.json keeps. */
  issued(): StoredToken[];
  /** Every id revoked here or heard of, which never comes back. */
  revokedIds(): string[];
  /** The fleet's list: this node's issued tokens from now on (the store leaves out what it knows revoked). */
  replace(tokens: StoredToken[]): void;
  /** Ids revoked on other nodes: remembered, and a token held here under one is dropped. */
  rememberRevoked(ids: string[]): void;
}

/** The fleet's data is not this node's to change (Redis lost it, or holds another fleet's): a token cannot be shared. */
export class FleetDataLostError extends Error {
  constructor(what: string) {
    super(`${what}: Redis does not hold this node's fleet (it lost its data, or holds another fleet's); nothing is shared until an operator re-seeds the fleet (FLEET_RESEED, docs/operations.md)`);
    this.name = 'FleetDataLostError';
  }
}

/** SADD at most this many ids per command. */
const ADD_BATCH = 1000;

/**
 * The issued tokens of a fleet (README.md here, "Tokens"): one hash in Redis is the list every
 * node serves, a set holds every revoked id any node knows, and a channel tells every node at once
 * that the list changed. Each node reads the list (with the epoch, in one transaction, so that a
 * Redis that lost its data is never read as "every token revoked"), checks every record as it
 * checks auth.json, and gives its store the new list, which leaves out every id it knows revoked.
 *
 * Revocations only take away, so they are told whatever the node's standing: each node adds the
 * ids it knows to the set, and learns the others'. Tokens are read from and brought to the list
 * only while the node is a member of the fleet Redis holds (`epoch()` not null).
 */
export class FleetTokens {
  private store: FleetTokenStore | null = null;
  /** Revoked ids Redis's set is known to hold. */
  private readonly told = new Set<string>();
  /** The set's size when it was last read: read again only when it changed. */
  private learnedAtSize = -1;

  constructor(
    private readonly redis: Redis,
    private readonly channels: FleetChannels,
    private readonly poolPrefix: string,
    /** The fleet's epoch as Redis keeps it while this node is its member; null while it is not (FleetMember). */
    private readonly epoch: () => { key: string; text: string } | null,
    private readonly log: Logger,
  ) {}

  private get tokensKey(): string {
    return `${this.poolPrefix}fleet:tokens`;
  }

  private get revokedKey(): string {
    return `${this.poolPrefix}fleet:tokens-revoked`;
  }

  /** The channel a change is announced on (every node of the pool listens). */
  get channel(): string {
    return `${this.poolPrefix}fleet:tokens-changed`;
  }

  /**
   * Brings this node's issued tokens into the fleet's list (unless revoked anywhere, or the node
   * is not a member), listens for changes, and applies the fleet's list once.
   */
  async start(store: FleetTokenStore): Promise<void> {
    this.store = store;
    await this.bring();
    await this.channels.listen(this.channel, () => void this.resync());
    await this.resync();
  }

  /** The node became a member again (the fleet was re-seeded): its tokens join the new list, as at a start. */
  async rejoined(): Promise<void> {
    this.learnedAtSize = -1;
    this.told.clear();
    await this.bring();
    await this.resync();
  }

  /** A token issued on this node: in the fleet's list, announced. Throws FleetDataLostError while the node is not a member. */
  async issued(token: StoredToken): Promise<void> {
    if (this.epoch() === null) throw new FleetDataLostError('token not shared');
    await this.redis.multi().hset(this.tokensKey, token.id, JSON.stringify(token)).publish(this.channel, `issued ${token.id}`).exec();
  }

  /** A token revoked on this node: in the revoked set for good, out of the list, announced. A failure is retried at each resync. */
  async revoked(id: string): Promise<void> {
    const m = this.redis.multi().sadd(this.revokedKey, id);
    if (this.epoch() !== null) m.hdel(this.tokensKey, id);
    await m.publish(this.channel, `revoked ${id}`).exec();
    this.told.add(id);
  }

  /** Tells and learns revocations; as a member, reads the fleet's list and applies it (after an announcement, and at every renewal). */
  async resync(): Promise<void> {
    const store = this.store;
    if (!store) return;
    try {
      await this.tellRevocations(store);
      await this.learnRevocations(store);
    } catch (error) {
      this.log.warn('the fleet’s revoked tokens could not be exchanged; revocations known here stay in force', { error: errorMessage(error) });
    }
    const epoch = this.epoch();
    if (epoch === null) return;
    try {
      const [[, held], [, entries]] = ((await this.redis.multi().get(epoch.key).hgetall(this.tokensKey).exec()) ?? []) as [[unknown, unknown], [unknown, unknown]];
      // Redis lost the fleet between the renewal's check and this read: nothing is applied (the next renewal says so).
      if (held !== epoch.text || typeof entries !== 'object' || entries === null) return;
      const tokens = this.check(entries as Record<string, string>);
      const revoked = new Set(store.revokedIds());
      const stale = tokens.filter((t) => revoked.has(t.id)).map((t) => t.id);
      // A revocation made here while Redis was away (or while this node was not a member) leaves the list now.
      if (stale.length > 0) await this.redis.multi().hdel(this.tokensKey, ...stale).publish(this.channel, `revoked ${stale.join(' ')}`).exec();
      store.replace(tokens.filter((t) => !revoked.has(t.id)));
    } catch (error) {
      this.log.warn('the fleet’s tokens could not be read; serving the ones known', { error: errorMessage(error) });
    }
  }

  /** This node's tokens into the list, unless revoked anywhere; only as a member. */
  private async bring(): Promise<void> {
    const store = this.store;
    if (!store || this.epoch() === null) return;
    const revoked = new Set([...(await this.redis.smembers(this.revokedKey)), ...store.revokedIds()]);
    const bringing = store.issued().filter((t) => !revoked.has(t.id));
    if (bringing.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const t of bringing) pipeline.hsetnx(this.tokensKey, t.id, JSON.stringify(t));
    await pipeline.exec();
  }

  /** Adds to Redis's set every id this node knows revoked that the set is not known to hold (all again when the set shrank: Redis lost it). */
  private async tellRevocations(store: FleetTokenStore): Promise<void> {
    if ((await this.redis.scard(this.revokedKey)) < this.told.size) {
      this.told.clear();
      this.learnedAtSize = -1;
    }
    const untold = store.revokedIds().filter((id) => !this.told.has(id));
    for (let i = 0; i < untold.length; i += ADD_BATCH) {
      const batch = untold.slice(i, i + ADD_BATCH);
      await this.redis.sadd(this.revokedKey, ...batch);
      for (const id of batch) this.told.add(id);
    }
  }

  /** Remembers the ids other nodes revoked (read again only when the set's size changed). */
  private async learnRevocations(store: FleetTokenStore): Promise<void> {
    const size = await this.redis.scard(this.revokedKey);
    if (size === this.learnedAtSize) return;
    const members = await this.redis.smembers(this.revokedKey);
    const known = new Set(store.revokedIds());
    const fresh = members.filter((id) => isTokenId(id) && !known.has(id));
    for (const id of members) this.told.add(id);
    if (fresh.length > 0) store.rememberRevoked(fresh);
    this.learnedAtSize = members.length;
  }

  /** Every record checked as auth.json's are; one that fails is left out and said. */
  private check(entries: Record<string, string>): StoredToken[] {
    const tokens: StoredToken[] = [];
    let refused = 0;
    for (const [id, text] of Object.entries(entries)) {
      try {
        const token = parseStoredToken(JSON.parse(text) as unknown, `the fleet's token ${JSON.stringify(id.slice(0, 40))}`);
        if (token.id !== id) throw new AuthFileShapeError(`has the id ${token.id} under ${id}`);
        tokens.push(token);
      } catch (error) {
        if (!(error instanceof AuthFileShapeError) && !(error instanceof SyntaxError)) throw error;
        refused++;
      }
    }
    if (refused > 0) this.log.warn('the fleet’s token list holds records that are not tokens; left out', { refused });
    if (tokens.length > MAX_STORED_TOKENS) this.log.warn('the fleet holds more tokens than a node keeps; the oldest are served', { tokens: tokens.length, kept: MAX_STORED_TOKENS });
    return tokens.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id)).slice(0, MAX_STORED_TOKENS);
  }
}
