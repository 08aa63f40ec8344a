import os from 'node:os';
import type { Config } from '../../shared/config/index.js';
import type { Logger } from '../../shared/logger.js';
import { EpochFile } from './fleet-epoch-file.js';
import type { FleetMemberOptions } from './fleet-member.js';

/** The Redis URL that makes this process a node of a fleet (STATE_STORE=redis://…), or null. */
export function fleetRedisUrl(config: Config): string | null {
  return config.stateStore === 'none' || config.stateStore === 'sqlite' ? null : config.stateStore;
}

/** How a node of `config` joins the fleet on `url`. */
export function fleetMemberOptions(config: Config, url: string, log: Logger): FleetMemberOptions {
  return {
    url,
    node: config.nodeName,
    leaseMs: config.nodeLeaseMs,
    address: { host: advertisedHost(config), port: config.hopPort, apiPort: config.apiPort },
    sessionLifetimeMs: Math.max(config.sessionTtlMs, config.sessionTtlMaxMs),
    epochs: new EpochFile(config.dataDir),
    reseed: config.fleetReseed,
    log: log.child({ component: 'fleet' }),
  };
}

/** NODE_ADDRESS, or BIND_HOST, or (BIND_HOST being a wildcard) the host name: where the other nodes reach this one. */
function advertisedHost(config: Config): string {
  if (config.nodeAddress !== '') return config.nodeAddress;
  return config.bindHost === '0.0.0.0' || config.bindHost === '::' ? os.hostname() : config.bindHost;
}
