import type { Config } from './config.js';
import { MAX_POOL_SIZE, PORTS_PER_INSTANCE } from './config.js';
import { ConfigError, type ConfigProblem } from './errors.js';
import { VARIABLES, type VariableDefinition } from './variables.js';
import { errorMessage } from '../errors/error-message.js';

export type Environment = Readonly<Record<string, string | undefined>>;

/** Reads a variable under its documented name or an alias; two different values are a problem. */
function readRaw(def: VariableDefinition, env: Environment, problems: ConfigProblem[]): string | undefined {
  const names = [def.name, ...(def.aliases ?? [])];
  const set = names
    .map((name) => ({ name, value: env[name] }))
    .filter((e): e is { name: string; value: string } => e.value !== undefined && e.value !== '');
  if (set.length > 1 && new Set(set.map((e) => e.value)).size > 1) {
    problems.push({
      variable: def.name,
      message: `set differently under ${set.map((e) => e.name).join(' and ')}; set only ${def.name}`,
    });
  }
  return set[0]?.value;
}

interface PortRange {
  variable: string;
  first: number;
  last: number;
}

function overlap(a: PortRange, b: PortRange): boolean {
  return a.first <= b.last && b.first <= a.last;
}

function crossCheck(c: Config, problems: ConfigProblem[]): void {
  if (c.minReady > c.poolSize) {
    problems.push({ variable: 'MIN_READY', message: `must not exceed POOL_SIZE (${c.poolSize}), got ${c.minReady}` });
  }
  if (c.poolSize + c.warmSpares > MAX_POOL_SIZE) {
    problems.push({ variable: 'WARM_SPARES', message: `POOL_SIZE + WARM_SPARES must not exceed ${MAX_POOL_SIZE} (spares take instance indexes too), got ${c.poolSize} + ${c.warmSpares}` });
  }
  if (c.sessionPortBase !== null && !c.authDisabled) {
    problems.push({
      variable: 'SESSION_PORT_BASE',
      message: 'session ports are credential-free, so they require AUTH_DISABLED=true',
    });
  }
  if (c.remediationBackoffBaseMs > c.remediationBackoffMaxMs) {
    problems.push({ variable: 'REMEDIATION_BACKOFF_BASE', message: 'must not exceed REMEDIATION_BACKOFF_MAX' });
  }
  const ranges: PortRange[] = [
    { variable: 'SOCKS_PORT', first: c.socksPort, last: c.socksPort },
    { variable: 'HTTP_PORT', first: c.httpPort, last: c.httpPort },
    { variable: 'API_PORT', first: c.apiPort, last: c.apiPort },
    {
      variable: 'INSTANCE_PORT_BASE',
      first: c.instancePortBase,
      last: c.instancePortBase + MAX_POOL_SIZE * PORTS_PER_INSTANCE - 1,
    },
  ];
  // The hop listener opens only on a node of a fleet (a redis:// STATE_STORE).
  if (c.stateStore !== 'sqlite' && c.stateStore !== 'none') ranges.push({ variable: 'HOP_PORT', first: c.hopPort, last: c.hopPort });
  if (c.sessionPortBase !== null) {
    ranges.push({ variable: 'SESSION_PORT_BASE', first: c.sessionPortBase, last: c.sessionPortBase + MAX_POOL_SIZE - 1 });
  }
  for (let i = 0; i < ranges.length; i++) {
    for (let j = i + 1; j < ranges.length; j++) {
      const a = ranges[i] as PortRange;
      const b = ranges[j] as PortRange;
      if (overlap(a, b)) {
        problems.push({
          variable: b.variable,
          message: `ports ${b.first}-${b.last} collide with ${a.variable} (${a.first}-${a.last})`,
        });
      }
    }
  }
}

/**
 * Parses every variable, collects every problem, and refuses with all of them at once
 * (ConfigError), so an operator fixes the file in one go. An empty value counts as unset.
 */
export function loadConfig(env: Environment): Config {
  const problems: ConfigProblem[] = [];
  const values: Partial<Record<keyof Config, unknown>> = {};
  for (const def of VARIABLES) {
    const raw = readRaw(def, env, problems);
    try {
      if (raw !== undefined) values[def.key] = def.parse(raw);
      else if (def.defaultText !== null) values[def.key] = def.parse(def.defaultText);
      else values[def.key] = def.computeDefault ? def.computeDefault() : null;
    } catch (e) {
      problems.push({ variable: def.name, message: errorMessage(e) });
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const config = values as Config;
  crossCheck(config, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** What workers receive: the operator's secrets stay in the supervisor (workers get digests). */
/** The configuration workers get: every setting the table marks secret is removed (null). */
export function configForWorkers(config: Config): Config {
  const copy: Record<string, unknown> = { ...config };
  for (const v of VARIABLES) if (v.secret === true) copy[v.key] = null;
  return copy as unknown as Config;
}

export const WORKER_CONFIG_ENV = 'EXITPOOL_WORKER_CONFIG';

export function encodeWorkerConfig(config: Config): string {
  return JSON.stringify(configForWorkers(config));
}

export function decodeWorkerConfig(text: string | undefined): Config {
  if (!text) throw new Error(`${WORKER_CONFIG_ENV} is missing: workers are started by the supervisor`);
  return JSON.parse(text) as Config;
}
