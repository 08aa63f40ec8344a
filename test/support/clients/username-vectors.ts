import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../../shared/version.js';

/**
 * clients/test-vectors/usernames.json: the one file of username cases that the service's
 * grammar, the Node client and the Python client are all tested on.
 */
export interface VectorParams {
  countries?: string[];
  lifetime_ms?: number;
  mode?: 'sticky' | 'rotating';
}

export type ReadVector = { username: string; key: string; params: VectorParams; dialect?: string } | { username: string; refused: string };

export interface BuildChoices {
  countries?: string[];
  lifetime_seconds?: number;
  mode?: string;
}

export type BuiltVector = { key: string; choices: BuildChoices; username: string } | { key: string; choices: BuildChoices; invalid: string };

export interface UsernameVectors {
  parameter_names: string[];
  unsupported_parameter_names: string[];
  read: ReadVector[];
  built: BuiltVector[];
}

export const USERNAME_VECTORS_FILE = path.join(packageRoot(), 'clients', 'test-vectors', 'usernames.json');

export function usernameVectors(): UsernameVectors {
  return JSON.parse(fs.readFileSync(USERNAME_VECTORS_FILE, 'utf8')) as UsernameVectors;
}

/** What the service must read a built username as: the key, and the choices as parameters. */
export function paramsOfChoices(c: BuildChoices, username: string): VectorParams {
  const out: VectorParams = {};
  if (c.countries !== undefined && c.countries.length > 0) out.countries = [...new Set(c.countries.map((x) => x.toLowerCase()))];
  if (c.lifetime_seconds !== undefined) out.lifetime_ms = c.lifetime_seconds * 1000;
  // A key escaped for want of any choice says the default mode out loud (mode-sticky).
  const mode = c.mode ?? (username.endsWith('-mode-sticky') ? 'sticky' : undefined);
  if (mode !== undefined) out.mode = mode as 'sticky' | 'rotating';
  return out;
}
