import { join, resolve } from 'node:path';
import { InstanceLayoutError } from './errors.js';
import type { TorInstanceOptions } from './instance-types.js';
import { MAX_UNIX_SOCKET_PATH_BYTES, type ControlEndpoint, type SocksEndpoint } from './torrc.js';

/**
 * A TorInstance's options with every default applied once, and where its files and sockets
 * live, so the rest of the instance reads values instead of `?? DEFAULT` at each use.
 */

export const INSTANCE_DEFAULTS = {
  torBinary: 'tor',
  conflux: false,
  maxCircuitDirtinessSecs: 3600,
  pinExitRelay: false,
  allowPublicNetwork: false,
  stallTimeoutMs: 120_000,
  rotationTimeoutMs: 60_000,
  stopGraceMs: 10_000,
  restartBackoffInitialMs: 1_000,
  restartBackoffMaxMs: 60_000,
  commandTimeoutMs: 10_000,
  livenessIntervalMs: 2_000,
  livenessTimeoutMs: 3_000,
  unresponsiveRestartMs: 60_000,
} as const;

type Defaulted = keyof typeof INSTANCE_DEFAULTS;

export type ResolvedInstanceOptions = Omit<TorInstanceOptions, Defaulted | 'supervisorPid'> & {
  readonly [K in Defaulted]: TorInstanceOptions[K] & {};
} & { readonly supervisorPid: number };

export function resolveInstanceOptions(options: TorInstanceOptions): ResolvedInstanceOptions {
  const resolved: Record<string, unknown> = { ...options, supervisorPid: options.supervisorPid ?? process.pid };
  for (const [key, value] of Object.entries(INSTANCE_DEFAULTS)) {
    if (resolved[key] === undefined) resolved[key] = value;
  }
  return resolved as ResolvedInstanceOptions;
}

export interface InstanceLayout {
  readonly dataDirectory: string;
  readonly torrcPath: string;
  readonly cookieFile: string;
  readonly controlEndpoint: ControlEndpoint;
  readonly socksEndpoint: SocksEndpoint;
  /** `unix:<path>` for the Unix-socket SocksPort (the normal case), else `127.0.0.1:<port>`. */
  readonly socksAddr: string;
  /** Set when DATA_DIR is too deep for the SOCKS socket and the SocksPort fell back to TCP. */
  readonly socksFallback?: { path: string; port: number };
}

/** Every instance's DataDirectory lies in `<dataDir>/tor` (torRootOf), as `<index>/`. */
export function torRootOf(dataDir: string): string {
  return join(resolve(dataDir), 'tor');
}

/** The torrc's name in an instance's DataDirectory. */
export const TORRC_FILE_NAME = 'torrc';

/**
 * `<dataDir>/tor/<index>` and its sockets. Unix sockets unless the path would exceed what the
 * kernel accepts (MAX_UNIX_SOCKET_PATH_BYTES); then the TCP port given, else InstanceLayoutError.
 */
export function instanceLayout(options: Pick<TorInstanceOptions, 'index' | 'dataDir' | 'socksPort' | 'controlPort'>): InstanceLayout {
  const dataDirectory = join(torRootOf(options.dataDir), String(options.index));
  const fits = (path: string): boolean => Buffer.byteLength(path) <= MAX_UNIX_SOCKET_PATH_BYTES;
  const controlSocket = join(dataDirectory, 'control.sock');
  let controlEndpoint: ControlEndpoint;
  if (fits(controlSocket)) controlEndpoint = { kind: 'unix', path: controlSocket };
  else if (options.controlPort !== undefined) controlEndpoint = { kind: 'tcp', port: options.controlPort };
  else throw new InstanceLayoutError(options.index, `control socket path ${controlSocket} is too long and no controlPort was given`);
  const socksSocket = join(dataDirectory, 'socks.sock');
  let socksEndpoint: SocksEndpoint;
  let socksFallback: { path: string; port: number } | undefined;
  if (fits(socksSocket)) {
    socksEndpoint = { kind: 'unix', path: socksSocket };
  } else if (options.socksPort !== undefined) {
    socksEndpoint = { kind: 'tcp', port: options.socksPort };
    socksFallback = { path: socksSocket, port: options.socksPort };
  } else {
    throw new InstanceLayoutError(options.index, `SocksPort socket path ${socksSocket} is too long and no socksPort was given`);
  }
  return {
    dataDirectory,
    torrcPath: join(dataDirectory, TORRC_FILE_NAME),
    cookieFile: join(dataDirectory, 'control_auth_cookie'),
    controlEndpoint,
    socksEndpoint,
    socksAddr: socksEndpoint.kind === 'unix' ? `unix:${socksEndpoint.path}` : `127.0.0.1:${socksEndpoint.port}`,
    ...(socksFallback ? { socksFallback } : {}),
  };
}
