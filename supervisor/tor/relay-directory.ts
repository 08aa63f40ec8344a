import { parseRouterStatus } from './control-events.js';
import { ControlCommandError } from './errors.js';

/**
 * Resolves an exit relay's fingerprint to its address (`GETINFO ns/id/<fp>`, the consensus `r`
 * line) and country (`GETINFO ip-to-country/<ip>`), cached per fingerprint for the life of one
 * tor process. Concurrent lookups of one fingerprint share a single query; failures are not
 * cached, so the next caller tries again.
 */

export interface RelayInfo {
  fingerprint: string;
  nickname: string;
  address: string;
  /** Lower-case ISO code from tor's GeoIP database; empty when unknown (`??`) or no GeoIP data. */
  country: string;
}

export type GetInfo = (keys: readonly string[]) => Promise<Map<string, string>>;

export class RelayDirectory {
  private readonly known = new Map<string, RelayInfo>();
  private readonly inFlight = new Map<string, Promise<RelayInfo>>();
  /** Bumped by clear(), so a lookup that was running then does not repopulate the cache. */
  private generation = 0;

  constructor(private readonly getInfo: GetInfo) {}

  cached(fingerprint: string): RelayInfo | undefined {
    return this.known.get(fingerprint);
  }

  resolve(fingerprint: string): Promise<RelayInfo> {
    const hit = this.known.get(fingerprint);
    if (hit) return Promise.resolve(hit);
    const running = this.inFlight.get(fingerprint);
    if (running) return running;
    const lookup = this.lookup(fingerprint).finally(() => {
      if (this.inFlight.get(fingerprint) === lookup) this.inFlight.delete(fingerprint);
    });
    this.inFlight.set(fingerprint, lookup);
    return lookup;
  }

  clear(): void {
    this.generation++;
    this.known.clear();
    this.inFlight.clear();
  }

  private async lookup(fingerprint: string): Promise<RelayInfo> {
    if (!/^[0-9A-F]{40}$/.test(fingerprint)) throw new RangeError(`not a relay fingerprint: ${fingerprint}`);
    const generation = this.generation;
    const key = `ns/id/${fingerprint}`;
    const status = parseRouterStatus((await this.getInfo([key])).get(key) ?? '');
    const info: RelayInfo = {
      fingerprint,
      nickname: status.nickname,
      address: status.address,
      country: await this.country(status.address),
    };
    if (generation === this.generation) this.known.set(fingerprint, info);
    return info;
  }

  private async country(address: string): Promise<string> {
    const key = `ip-to-country/${address}`;
    try {
      const code = ((await this.getInfo([key])).get(key) ?? '').trim().toLowerCase();
      return /^[a-z]{2}$/.test(code) ? code : '';
    } catch (error) {
      // 551/552: tor has no GeoIP data for this address family; the country stays unknown.
      if (error instanceof ControlCommandError) return '';
      throw error;
    }
  }
}
