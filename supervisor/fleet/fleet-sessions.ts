import type { Redis } from 'ioredis';
import type { HopGrant } from '../../shared/auth/hop-credential.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { FleetLeases } from './fleet-leases.js';

/**
 * Claims a session for ARGV[1] unless a live node (one whose address key is in force) owns it;
 * ARGV[2] = '1' claims it whatever (a forwarded connection: the forwarder believes this node
 * owns it, and the loop must end here). Returns {outcome, node, address}: outcome 'here' (it is
 * ARGV[1]'s now), 'taken' (it was `node`'s, which is gone), 'there' (`node`'s, live at `address`).
 */
const CLAIM_SESSION = `local owner = redis.call('GET', KEYS[1])
if owner == false or owner == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'here', ARGV[1], ''}
end
local address = redis.call('GET', ARGV[3] .. owner)
if ARGV[2] == '1' or address == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'taken', owner, ''}
end
return {'there', owner, address}`;

const RELEASE_SESSION = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** Where a session is served. */
export type SessionOwnership =
  | { kind: 'here' }
  /** This node took it over from `from`, which is gone (its lease lapsed): audited by the caller. */
  | { kind: 'taken'; from: string }
  | { kind: 'there'; node: string; host: string; port: number };

/** How this node signs hops to other nodes (FleetHopKeys). */
export interface HopSigner {
  canReach(owner: string): boolean;
  grant(owner: string, sessionKey: string): HopGrant | null;
}

/** At most this many owners of other nodes' sessions are remembered (each is asked of Redis again once forgotten). */
export const MAX_REMEMBERED_OWNERS = 100_000;

/**
 * Which node owns each named session (README.md here, "Sessions"). A session belongs to the node
 * that first served it; another node that receives one of its connections forwards it there.
 * Asked of Redis only for a key this node does not serve and does not know the owner of; after
 * that the owner is remembered for as long as it is alive, so a forwarded session costs no Redis
 * round trip per connection either.
 */
export class FleetSessions {
  /** Owners of sessions this node forwards: key → node. */
  private readonly owners = new Map<string, string>();
  private readonly unreachable: ThrottledWarning;

  constructor(
    private readonly redis: Redis,
    private readonly leases: FleetLeases,
    private readonly node: string,
    /** Live nodes and their hop listeners (host:port), as of the last renewal. */
    private readonly addresses: () => ReadonlyMap<string, string>,
    /** How long an ownership outlives its last refresh (the owner refreshes those in use). */
    private readonly ownershipTtlMs: number,
    /** How a forwarded connection authenticates to its owner. */
    readonly hop: HopSigner,
    log: Logger,
  ) {
    this.unreachable = new ThrottledWarning(log, 'Redis cannot be reached: new sessions are served by the node that receives them', { level: 'warn' });
  }

  /** The owner of a session this node forwards, while that node is alive; no Redis. */
  rememberedOwner(key: string): { node: string; host: string; port: number } | undefined {
    const node = this.owners.get(key);
    if (node === undefined) return undefined;
    const address = this.addresses().get(node);
    if (address === undefined) {
      // The owner is gone: the next connection asks Redis, and takes the session over.
      this.owners.delete(key);
      return undefined;
    }
    return { node, ...splitAddress(address) };
  }

  /**
   * Where a session this node does not serve yet goes: claimed here when nobody (alive) owns it,
   * or when `forwarded` (another node sent it here as its owner). Redis unreachable: here.
   */
  async claim(key: string, forwarded: boolean): Promise<SessionOwnership> {
    let reply: unknown;
    try {
      reply = await this.redis.eval(CLAIM_SESSION, 1, this.leases.sessionKey(key), this.node, forwarded ? '1' : '0', this.leases.addressKey(''), String(this.ownershipTtlMs));
    } catch (error) {
      this.unreachable.note({ error: errorMessage(error) });
      return { kind: 'here' };
    }
    const [outcome, node, address] = Array.isArray(reply) ? (reply as unknown[]).map(String) : [];
    if (outcome === 'there' && node !== undefined && address !== undefined) {
      const at = splitAddress(address);
      if (at.port > 0) {
        this.remember(key, node);
        return { kind: 'there', node, ...at };
      }
    }
    this.owners.delete(key);
    if (outcome === 'taken' && node !== undefined && node !== this.node) return { kind: 'taken', from: node };
    return { kind: 'here' };
  }

  /**
   * The other live node that owns `key` (this node does not hold it), with its API address, for
   * the API to pass a request about the session on; null when none does. Reads, never claims.
   */
  async ownerElsewhere(key: string): Promise<{ node: string; api: string } | null> {
    const owner = await this.redis.get(this.leases.sessionKey(key));
    if (owner === null || owner === this.node || !this.addresses().has(owner)) return null;
    const api = await this.leases.apiAddressOf(owner);
    return api === null ? null : { node: owner, api };
  }

  /**
   * Sessions this node served since the last refresh: their ownership is renewed for another
   * term. Returns those another live node owns (both served one name while they could not reach
   * Redis): this node gives them up, so that their next connections go to the owner.
   */
  async refresh(keys: readonly string[]): Promise<{ key: string; owner: string }[]> {
    if (keys.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const key of keys) pipeline.eval(CLAIM_SESSION, 1, this.leases.sessionKey(key), this.node, '0', this.leases.addressKey(''), String(this.ownershipTtlMs));
    const results = (await pipeline.exec()) ?? [];
    const ownedElsewhere: { key: string; owner: string }[] = [];
    results.forEach(([error, reply], i) => {
      if (error || !Array.isArray(reply)) return;
      const [outcome, owner] = (reply as unknown[]).map(String);
      if (outcome === 'there' && owner !== undefined && owner !== this.node) ownedElsewhere.push({ key: keys[i] as string, owner });
    });
    return ownedElsewhere;
  }

  /** The session left this node's table (expired, deleted): another node may start it afresh. */
  released(key: string): void {
    void this.redis.eval(RELEASE_SESSION, 1, this.leases.sessionKey(key), this.node).catch(() => undefined);
  }

  /** Forgets the owners that are no longer alive (called after each renewal). */
  forgetGoneOwners(): void {
    const live = this.addresses();
    for (const [key, node] of this.owners) if (!live.has(node)) this.owners.delete(key);
  }

  private remember(key: string, node: string): void {
    if (this.owners.size >= MAX_REMEMBERED_OWNERS) this.owners.clear();
    this.owners.set(key, node);
  }
}

/** `host:port`, the host possibly a bracketed IPv6 literal; port 0 when unreadable. */
function splitAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const port = Number(address.slice(colon + 1));
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return colon > 0 && Number.isInteger(port) && port > 0 && port < 65536 ? { host, port } : { host: '', port: 0 };
}
