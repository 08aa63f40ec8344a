import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../auth/atomic-write.js';
import { decodeEpoch, encodeEpoch, type Epoch } from './fleet-epoch.js';

export const FLEET_EPOCH_FILE_NAME = 'fleet-epoch.json';
const FLEET_EPOCH_FILE_VERSION = 1;
/** Pools one DATA_DIR remembers an epoch for (a node moved between pools keeps each one's). */
const MAX_POOLS = 64;
/** Larger than any file this code writes. */
const MAX_FILE_BYTES = 64 * 1024;

/** Where a node remembers the epoch of the fleet it belongs to: beside its auth.json, out of Redis's reach. */
export interface EpochMemory {
  /** Where it is kept, for messages. */
  readonly where: string;
  load(poolPrefix: string): Promise<Epoch | null>;
  save(poolPrefix: string, epoch: Epoch): Promise<void>;
}

/** DATA_DIR/fleet-epoch.json could not be used: the start stops (it is never guessed at or overwritten). */
export class EpochFileError extends Error {
  constructor(
    readonly file: string,
    why: string,
  ) {
    super(`${file} ${why}; it is left as it is (remove it only for a node that should join its fleet as a new one)`);
    this.name = 'EpochFileError';
  }
}

/**
 * DATA_DIR/fleet-epoch.json (0600): `{"version": 1, "pools": {"<pool prefix>": "<epoch> <continued>…"}}`.
 * A file that cannot be read or is not one stops the start: read as "no epoch", it would make a
 * node whose Redis lost its data look like a new one (which then creates a fleet of its own).
 */
export class EpochFile implements EpochMemory {
  readonly file: string;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, FLEET_EPOCH_FILE_NAME);
  }

  get where(): string {
    return this.file;
  }

  async load(poolPrefix: string): Promise<Epoch | null> {
    const text = (await this.pools()).get(poolPrefix);
    if (text === undefined) return null;
    const epoch = decodeEpoch(text);
    if (epoch === null) throw new EpochFileError(this.file, `holds an epoch for ${poolPrefix} that is not one`);
    return epoch;
  }

  async save(poolPrefix: string, epoch: Epoch): Promise<void> {
    const pools = await this.pools();
    pools.delete(poolPrefix);
    pools.set(poolPrefix, encodeEpoch(epoch));
    while (pools.size > MAX_POOLS) pools.delete(pools.keys().next().value as string);
    const text = JSON.stringify({ version: FLEET_EPOCH_FILE_VERSION, pools: Object.fromEntries(pools) }, null, 2) + '\n';
    await writeFileAtomic(this.file, text, { mode: 0o600 });
  }

  private async pools(): Promise<Map<string, string>> {
    let text: string;
    try {
      const stat = await fsp.stat(this.file);
      if (!stat.isFile() || stat.size > MAX_FILE_BYTES) throw new EpochFileError(this.file, 'is not a file this service wrote');
      text = await fsp.readFile(this.file, 'utf8');
    } catch (error) {
      if (error instanceof EpochFileError) throw error;
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw new EpochFileError(this.file, `cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new EpochFileError(this.file, 'is not JSON');
    }
    const o = value as { version?: unknown; pools?: unknown };
    if (typeof value !== 'object' || value === null || o.version !== FLEET_EPOCH_FILE_VERSION || typeof o.pools !== 'object' || o.pools === null || Array.isArray(o.pools)) {
      throw new EpochFileError(this.file, `is not a version-${FLEET_EPOCH_FILE_VERSION} epoch file`);
    }
    const entries = Object.entries(o.pools);
    if (entries.length > MAX_POOLS || !entries.every(([, v]) => typeof v === 'string')) throw new EpochFileError(this.file, 'holds pools that are not epochs');
    return new Map(entries as [string, string][]);
  }
}
