import { Redis } from 'ioredis';

/** How long a start waits for Redis before refusing to start (the service would otherwise run without the state it was asked to keep). */
export const REDIS_CONNECT_TIMEOUT_MS = 10_000;

/** A pool name from the URL's path: the key prefix `exitpool:<name>:`. Anything else keeps the plain `exitpool:`. */
const POOL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** Where a `STATE_STORE=redis://…` URL points, and under which key prefix the pool lives. */
export interface RedisLocation {
  /** The URL without its path, credentials included: only for connecting. */
  readonly connectUrl: string;
  /** `exitpool:` or `exitpool:<pool>:`; every key of the pool (state of every node, fleet leases) is under it. */
  readonly poolPrefix: string;
  /** For logs and errors: host and pool name, never the credentials. */
  readonly shown: string;
}

export function redisLocation(url: string): RedisLocation {
  const parsed = new URL(url);
  const name = decodeURIComponent(parsed.pathname.replace(/^\/+/, ''));
  const target = new URL(url);
  target.pathname = '';
  return {
    connectUrl: target.toString(),
    poolPrefix: `exitpool:${POOL_NAME.test(name) ? `${name}:` : ''}`,
    shown: `redis://${parsed.host}/${name}`,
  };
}

/**
 * A client that connects when asked (`connect()`), retries a command twice, and keeps its errors
 * out of stderr (the commands that fail report them). With `commandTimeoutMs`, a command a Redis
 * that hangs (rather than refuses) does not answer fails after that long instead of waiting.
 */
export function redisClient(location: RedisLocation, options: { commandTimeoutMs?: number } = {}): Redis {
  const redis = new Redis(location.connectUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 2,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    ...(options.commandTimeoutMs === undefined ? {} : { commandTimeout: options.commandTimeoutMs }),
  });
  redis.on('error', () => undefined);
  return redis;
}

/** Closes a client politely, or at once when Redis is not answering. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  await redis.quit().catch(() => redis.disconnect());
}
