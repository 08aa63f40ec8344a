import type { Scope } from './principal.js';

/**
 * `store`: issued through the API or on first boot. `config`: PROXY_TOKEN, never persisted.
 * `auth-disabled`: issued while AUTH_DISABLED, kept in memory only (gone at the next start).
 */
export type TokenSource = 'store' | 'config' | 'auth-disabled';

/** A token as GET /api/tokens lists it (docs/api.md, "Token"); field names are the wire names. */
export interface TokenRecord {
  id: string;
  name: string;
  scope: Scope;
  source: TokenSource;
  /** Unix seconds. */
  created_at: number;
  /** An addition of ours: the party the token was issued to ('' for the operator's own): tokens of different owners are independent reporters. */
  owner: string;
}

/** Only the creation response carries the secret; nothing keeps it afterwards. */
export interface CreatedToken extends TokenRecord {
  secret: string;
}
