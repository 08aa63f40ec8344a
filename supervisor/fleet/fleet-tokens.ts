import type { Redis } from 'ioredis';
import type { Logger } from '../../shared/logger.js';
import type { FleetChannels } from './fleet-channels.js';
import { AuthFileShapeError, MAX_STORED_TOKENS, parseStoredToken, type StoredToken } from '../auth/auth-file.js';

/**
 * The issued tokens of a fleet (README.md here, "Tokens"): one hash in Redis is the list every
 * node serves, a set remembers revoked ids (so a node that joins with an old auth.json does not
 * bring a revoked token back), and a channel tells every node at once that the list changed.
 * Each node then reads the whole list, checks every record as it checks auth.json, and gives
 * its workers the new snapshot (as a change made on the node itself would).
 */
export class FleetTokens {
  /** Revoked here while Redis did not answer: kept out of every list applied, and told to the fleet at each resync until it is. */
  private readonly unsentRevocations = new Set<string>();
  private apply: (tokens: StoredToken[]) => void = () => undefined;

  constructor(
    private readonly redis: Redis,
    private readonly channels: FleetChannels,
    private readonly poolPrefix: string,
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
   * Brings this node's issued tokens into the fleet's list (unless revoked there), listens for
   * changes, and applies the fleet's list once: `apply` gets it now and after every change.
   */
  async start(local: readonly StoredToken[], apply: (tokens: StoredToken[]) => void): Promise<void> {
    this.apply = apply;
    const revoked = new Set(await this.redis.smembers(this.revokedKey));
    const bringing = local.filter((t) => !revoked.has(t.id));
    if (bringing.length > 0) {
      const pipeline = this.redis.pipeline();
      for (const t of bringing) pipeline.hsetnx(this.tokensKey, t.id, JSON.stringify(t));
      await pipeline.exec();
    }
    await this.channels.listen(this.channel, () => void this.resync());
    await this.resync();
  }

  /** A token issued on this node: in the fleet's list, announced. */
  async issued(token: StoredToken): Promise<void> {
    await this.redis.multi().hset(this.tokensKey, token.id, JSON.stringify(token)).publish(this.channel, `issued ${token.id}`).exec();
  }

  /** A token revoked on this node: out of the fleet's list for good, announced. */
  async revoked(id: string): Promise<void> {
    try {
      await this.redis.multi().hdel(this.tokensKey, id).sadd(this.revokedKey, id).publish(this.channel, `revoked ${id}`).exec();
    } catch (error) {
      this.unsentRevocations.add(id);
      throw error;
    }
  }

  /** Reads the fleet's list and applies it (after an announcement, and at every renewal as a safety net). */
  async resync(): Promise<void> {
    try {
      for (const id of [...this.unsentRevocations]) {
        await this.redis.multi().hdel(this.tokensKey, id).sadd(this.revokedKey, id).publish(this.channel, `revoked ${id}`).exec();
        this.unsentRevocations.delete(id);
      }
    } catch {
      // Still away: tried again at the next resync; meanwhile the revocation stands here.
    }
    try {
      this.apply((await this.read()).filter((t) => !this.unsentRevocations.has(t.id)));
    } catch (error) {
      this.log.warn('the fleet’s tokens could not be read; serving the ones known', { error: (error as Error).message });
    }
  }

  /** Every record checked as auth.json's are; one that fails is left out and said. */
  private async read(): Promise<StoredToken[]> {
    const entries = Object.entries(await this.redis.hgetall(this.tokensKey));
    const tokens: StoredToken[] = [];
    let refused = 0;
    for (const [id, text] of entries) {
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
