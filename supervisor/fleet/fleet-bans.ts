import type { Redis } from 'ioredis';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import type { FleetChannels } from './fleet-channels.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { ExitBan } from '../exits/exit-bans.js';
import { banKey, decodeBan, encodeBan } from '../state/exit-records.js';
import { InvalidStoredRecord } from '../state/stored-value.js';

/**
 * The fleet's exit bans (README.md here, "Bans"): an exit burnt on one node is burnt for every
 * node. One hash holds the bans in force (`<fingerprint>|<domain>` → the ban, as the durable state
 * keeps it); a channel tells every node at once of a ban or a lift. Each node applies what it
 * reads as it applies its own durable state's bans: checked field by field, a longer ban wins.
 * Only while the node is a member of the fleet Redis holds (`member()`): otherwise (Redis lost
 * its data) its bans stay its own, and are shared once it is a member again (`rejoined`).
 */
export class FleetBans {
  private exits: ExitAssignments | null = null;
  /** Bans made here while Redis did not answer, shared at the next renewal that reaches it. */
  private readonly pendingShare = new Set<ExitBan>();

  constructor(
    private readonly redis: Redis,
    private readonly channels: FleetChannels,
    private readonly poolPrefix: string,
    private readonly log: Logger,
    /** Whether this node is a member of the fleet Redis holds (FleetMember's epoch). */
    private readonly member: () => boolean,
    private readonly now: () => number = Date.now,
  ) {}

  private get bansKey(): string {
    return `${this.poolPrefix}fleet:bans`;
  }

  get channel(): string {
    return `${this.poolPrefix}fleet:bans-changed`;
  }

  /** Shares this node's bans (those restored at start included), applies the fleet's, and listens for changes. */
  async start(exits: ExitAssignments): Promise<void> {
    this.exits = exits;
    exits.on('banned', this.onBanned);
    exits.on('lifted', this.onLifted);
    await this.shareMine(exits);
    await this.channels.listen(this.channel, (message) => {
      if (!this.member()) return;
      if (message.startsWith('lift ')) this.exits?.applyFleetLift(message.slice('lift '.length));
      else void this.resync();
    });
    await this.resync();
  }

  /** The node became a member again (the fleet was re-seeded): its bans are shared, as at a start. */
  async rejoined(): Promise<void> {
    this.pendingShare.clear();
    if (this.exits) await this.shareMine(this.exits);
    await this.resync();
  }

  private async shareMine(exits: ExitAssignments): Promise<void> {
    const mine = exits.bans.list(this.now());
    if (mine.length === 0 || !this.member()) return;
    const pipeline = this.redis.pipeline();
    for (const ban of mine) pipeline.hset(this.bansKey, banKey(ban), encodeBan(ban));
    await pipeline.exec();
  }

  /** Reads every ban in force and applies it here; drops the ended ones from Redis. */
  async resync(): Promise<void> {
    const exits = this.exits;
    if (!exits || !this.member()) return;
    try {
      const now = this.now();
      const ended: string[] = [];
      let refused = 0;
      for (const [field, text] of Object.entries(await this.redis.hgetall(this.bansKey))) {
        let ban: ExitBan;
        try {
          ban = decodeBan(field, text);
        } catch (error) {
          if (!(error instanceof InvalidStoredRecord)) throw error;
          refused++;
          continue;
        }
        if (ban.until <= now) ended.push(field);
        else exits.applyFleetBan(ban);
      }
      if (ended.length > 0) await this.redis.hdel(this.bansKey, ...ended);
      if (refused > 0) this.log.warn('the fleet’s ban list holds records that are not bans; left out', { refused });
    } catch (error) {
      this.log.warn('the fleet’s bans could not be read; keeping the ones known', { error: errorMessage(error) });
    }
  }

  /** Stops sharing this node's bans (the channel closes with the node's other ones). */
  stop(): void {
    this.exits?.off('banned', this.onBanned);
    this.exits?.off('lifted', this.onLifted);
  }

  private readonly onBanned = (ban: ExitBan): void => void this.banned(ban);
  private readonly onLifted = (fingerprint: string): void => void this.lifted(fingerprint);

  private async banned(ban: ExitBan): Promise<void> {
    // Not a member: the ban stays this node's until the fleet is re-seeded (rejoined shares it then).
    if (!this.member()) return;
    try {
      await this.redis.multi().hset(this.bansKey, banKey(ban), encodeBan(ban)).publish(this.channel, `ban ${banKey(ban)}`).exec();
    } catch (error) {
      // In force here; the other nodes learn of it at the next renewal that reaches Redis.
      this.pendingShare.add(ban);
      this.log.warn('an exit ban could not be shared with the other nodes yet', { fingerprint: ban.fingerprint, error: errorMessage(error) });
    }
  }

  private async lifted(fingerprint: string): Promise<void> {
    if (!this.member()) return;
    try {
      const fields = (await this.redis.hkeys(this.bansKey)).filter((f) => f.startsWith(`${fingerprint}|`));
      const m = this.redis.multi();
      if (fields.length > 0) m.hdel(this.bansKey, ...fields);
      await m.publish(this.channel, `lift ${fingerprint}`).exec();
    } catch (error) {
      this.log.warn('a lifted ban could not be lifted on the other nodes', { fingerprint, error: errorMessage(error) });
    }
  }

  /** Shares what could not be shared before (called at each renewal, before resync). */
  async sharePending(): Promise<void> {
    for (const ban of [...this.pendingShare]) {
      this.pendingShare.delete(ban);
      if (ban.until > this.now()) await this.banned(ban);
    }
  }
}
