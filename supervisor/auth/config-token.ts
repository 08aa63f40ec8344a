import { createHash } from 'node:crypto';
import { digestTokenSecret } from '../../shared/auth/token-format.js';
import type { StoredToken } from './auth-file.js';
import { BASE62_ALPHABET } from './random-base62.js';

/** Name under which PROXY_TOKEN is listed. */
export const CONFIG_TOKEN_NAME = 'PROXY_TOKEN';

export interface ConfigToken extends StoredToken {
  scope: 'proxy';
}

/** PROXY_TOKEN as a token: its id is derived from its digest, so it is stable across restarts. */
export function configTokenFrom(secret: string, nowMs: number): ConfigToken {
  const digest = digestTokenSecret(secret);
  const bytes = createHash('sha256').update(`exitpool config token\0${digest}`).digest();
  const id = [...bytes.subarray(0, 10)].map((b) => BASE62_ALPHABET[b % 62]).join('');
  return { id, name: CONFIG_TOKEN_NAME, scope: 'proxy', digest, createdAt: Math.floor(nowMs / 1000) };
}
