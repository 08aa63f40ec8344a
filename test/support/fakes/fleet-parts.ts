import type { StoredToken } from '../../../supervisor/auth/auth-file.js';
import type { Epoch } from '../../../supervisor/fleet/fleet-epoch.js';
import type { EpochMemory } from '../../../supervisor/fleet/fleet-epoch-file.js';
import type { FleetMemberOptions } from '../../../supervisor/fleet/fleet-member.js';
import type { FleetTokenStore } from '../../../supervisor/fleet/fleet-tokens.js';
import { logger } from '../../../shared/logger.js';

/** The lease the fleet's component tests run with (renewed every third of it). */
export const FLEET_TEST_LEASE_MS = 2_000;

/** What each node (by name) remembers of its fleet's epoch, as its DATA_DIR would; `clear()` between tests. */
export class MemoryDataDirs {
  private readonly byNode = new Map<string, Map<string, Epoch>>();

  of(node: string): EpochMemory {
    let pools = this.byNode.get(node);
    if (!pools) this.byNode.set(node, (pools = new Map()));
    const p = pools;
    return { where: `memory of ${node}`, load: async (pool) => p.get(pool) ?? null, save: async (pool, epoch) => void p.set(pool, epoch) };
  }

  clear(): void {
    this.byNode.clear();
  }
}

export function memberOptions(url: string, node: string, dataDirs: MemoryDataDirs, extra: Partial<FleetMemberOptions> = {}): FleetMemberOptions {
  return {
    url,
    node,
    leaseMs: FLEET_TEST_LEASE_MS,
    address: { host: '127.0.0.1', port: 1080, apiPort: 8080 },
    sessionLifetimeMs: 60_000,
    epochs: dataDirs.of(node),
    reseed: '',
    log: logger(),
    ...extra,
  };
}

/** A credential store as AuthStore behaves for the fleet: a revoked id never comes back. */
export class MemoryTokenStore implements FleetTokenStore {
  readonly revoked = new Set<string>();

  constructor(public tokens: StoredToken[]) {}

  issued(): StoredToken[] {
    return this.tokens;
  }

  revokedIds(): string[] {
    return [...this.revoked];
  }

  replace(tokens: StoredToken[]): void {
    this.tokens = tokens.filter((t) => !this.revoked.has(t.id));
  }

  rememberRevoked(ids: string[]): void {
    for (const id of ids) this.revoked.add(id);
    this.tokens = this.tokens.filter((t) => !this.revoked.has(t.id));
  }

  /** A revocation made on this node (the caller tells the fleet). */
  revoke(id: string): void {
    this.rememberRevoked([id]);
  }

  ids(): string[] {
    return this.tokens.map((t) => t.id);
  }
}
