import type { Scope } from './principal.js';

/**
 * What the supervisor pushes to the workers whenever the credentials change. JSON-serialisable
 * (it crosses IPC) and treated as immutable: a change is a new snapshot with a higher version.
 */
export interface SnapshotToken {
  id: string;
  scope: Scope;
  /** SHA-256 of the secret, lowercase hex. */
  digest: string;
}

/** Proxy workers get only what verifying a token needs: no password hash, no signing key. */
export interface ProxyCredentialSnapshot {
  /** Grows with every change, so a worker can ignore a snapshot older than the one it holds. */
  version: number;
  authDisabled: boolean;
  tokens: SnapshotToken[];
}

/** The API worker also signs in (bcrypt) and signs and verifies sign-in credentials (JWT). */
export interface ApiCredentialSnapshot extends ProxyCredentialSnapshot {
  adminUser: string;
  /** bcrypt hash of the admin password (see admin-password.ts for what exactly is hashed). */
  passwordHash: string;
  /** HMAC key for sign-in credentials, base64. Derived; changes when the admin credentials do. */
  signingKey: string;
}

/** True when `next` should replace `current` (snapshots can arrive out of order). */
export function isNewerSnapshot(current: { version: number } | null, next: { version: number }): boolean {
  return current === null || next.version > current.version;
}
