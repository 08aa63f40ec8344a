import type { Redis } from 'ioredis';

/**
 * The fleet's leases in Redis, as plain keys with a time to live under the pool's prefix:
 * `fleet:node:<node>` holds the token of the one process running that node, and
 * `fleet:exit:<fingerprint>` the name of the node that pins that exit, and
 * `fleet:unit:<key>` the node whose instance holds a distinctness unit (EXIT_DISTINCT beyond
 * the relay: `block:<the egress /24 or /48>`, `family:<fingerprint>`). A lease is taken,
 * renewed and given up only by its holder, each in one script, so two nodes can never both
 * believe they hold one. Redis's own expiry ends the leases of a node that died.
 */

/** Takes the lease when it is free, renews it when it is already `holder`'s; returns the holder after the call. */
const CLAIM = `local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v`;

/** Gives the lease up only when `holder` holds it (an expired and retaken lease stays the new holder's). */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** Deletes the key only when its value starts with ARGV[1] (the holder's own record). */
const RELEASE_PREFIXED = `local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** How many keys one SCAN step asks for: the exits of a pool are at most a few thousand. */
const SCAN_COUNT = 500;

export class FleetLeases {
  constructor(
    private readonly redis: Redis,
    private readonly poolPrefix: string,
  ) {}

  nodeKey(node: string): string {
    return `${this.poolPrefix}fleet:node:${node}`;
  }

  exitKey(fingerprint: string): string {
    return `${this.poolPrefix}fleet:exit:${fingerprint}`;
  }

  /** A distinctness unit (`block:…`, `family:…`) an instance of the holding node leaves through. */
  unitKey(unit: string): string {
    return `${this.poolPrefix}fleet:unit:${unit}`;
  }

  /** `host:port` of a live node's hop listener (NODE_ADDRESS, HOP_PORT); lapses with the node's lease. */
  addressKey(node: string): string {
    return `${this.poolPrefix}fleet:address:${node}`;
  }

  /** node → `host:port` of its API, for another node's API to pass on a request about one of its sessions. */
  get apiAddressesKey(): string {
    return `${this.poolPrefix}fleet:api-addresses`;
  }

  /** A node's summary of itself (GET /api/fleet); lapses with the node's lease. */
  summaryKey(node: string): string {
    return `${this.poolPrefix}fleet:summary:${node}`;
  }

  async publishSummary(node: string, summary: string, ttlMs: number): Promise<void> {
    await this.redis.set(this.summaryKey(node), summary, 'PX', ttlMs);
  }

  async dropSummary(node: string): Promise<void> {
    await this.redis.del(this.summaryKey(node));
  }

  /** Every live node's summary, node → its text. */
  async summaries(): Promise<Map<string, string>> {
    return this.valuesUnder(this.summaryKey(''));
  }

  /** The node that owns a named session (no time to live: its owner gives it up, or another node takes it over once the owner is gone). */
  sessionKey(key: string): string {
    return `${this.poolPrefix}fleet:session:${key}`;
  }

  /** A node's hop keys, for the other nodes to sign hops to it (fleet-hop-keys.ts); lapses with the node's lease. */
  hopKeysKey(node: string): string {
    return `${this.poolPrefix}fleet:hop-keys:${node}`;
  }

  async publishHopKeys(node: string, publication: string, ttlMs: number): Promise<void> {
    await this.redis.set(this.hopKeysKey(node), publication, 'PX', ttlMs);
  }

  /** Drops this process's published keys (a later process under the name publishes its own). */
  async dropHopKeys(node: string, process: string): Promise<void> {
    await this.redis.eval(RELEASE_PREFIXED, 1, this.hopKeysKey(node), `${process} `);
  }

  /** For each of `nodes`: its published hop keys and its process (the node lease's value), where Redis has them. */
  async peerRecords(nodes: readonly string[]): Promise<{ keys: Map<string, string>; processes: Map<string, string> }> {
    const keys = new Map<string, string>();
    const processes = new Map<string, string>();
    if (nodes.length === 0) return { keys, processes };
    const values = await this.redis.mget(...nodes.map((n) => this.hopKeysKey(n)), ...nodes.map((n) => this.nodeKey(n)));
    nodes.forEach((node, i) => {
      const published = values[i];
      const process = values[nodes.length + i];
      if (typeof published === 'string') keys.set(node, published);
      if (typeof process === 'string') processes.set(node, process);
    });
    return { keys, processes };
  }

  async publishAddress(node: string, address: string, apiAddress: string, ttlMs: number): Promise<void> {
    await this.redis.multi().set(this.addressKey(node), address, 'PX', ttlMs).hset(this.apiAddressesKey, node, apiAddress).exec();
  }

  async forgetApiAddress(node: string): Promise<void> {
    await this.redis.hdel(this.apiAddressesKey, node);
  }

  async apiAddressOf(node: string): Promise<string | null> {
    return this.redis.hget(this.apiAddressesKey, node);
  }

  /** Claims (or renews) one lease; resolves with whoever holds it now. */
  async claim(key: string, holder: string, ttlMs: number): Promise<string> {
    return String(await this.redis.eval(CLAIM, 1, key, holder, String(ttlMs)));
  }

  /** Claims or renews many leases in one round trip; the holder of each, in order. */
  async claimAll(keys: readonly string[], holder: string, ttlMs: number): Promise<string[]> {
    if (keys.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const key of keys) pipeline.eval(CLAIM, 1, key, holder, String(ttlMs));
    const results = (await pipeline.exec()) ?? [];
    return results.map(([error, value]) => {
      if (error) throw error;
      return String(value);
    });
  }

  async releaseAll(keys: readonly string[], holder: string): Promise<void> {
    if (keys.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const key of keys) pipeline.eval(RELEASE, 1, key, holder);
    await pipeline.exec();
  }

  /** Every exit lease in force: fingerprint → holding node. */
  async exitHolders(): Promise<Map<string, string>> {
    return this.valuesUnder(this.exitKey(''));
  }

  /** Every unit lease in force: unit → holding node. */
  async unitHolders(): Promise<Map<string, string>> {
    return this.valuesUnder(this.unitKey(''));
  }

  /** Every key under `prefix` with its value, the prefix cut off. */
  private async valuesUnder(prefix: string): Promise<Map<string, string>> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', SCAN_COUNT);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    const found = new Map<string, string>();
    if (keys.length === 0) return found;
    const values = await this.redis.mget(...keys);
    keys.forEach((key, i) => {
      const value = values[i];
      // Expired between the scan and the read: gone.
      if (typeof value === 'string') found.set(key.slice(prefix.length), value);
    });
    return found;
  }

  /** Every live node (its address lease in force) and its hop listener. */
  async nodeAddresses(): Promise<Map<string, string>> {
    return this.valuesUnder(this.addressKey(''));
  }
}
