import { BCRYPT_HASH_PATTERN } from '../../shared/auth/admin-password.js';
import { AuthBadRequestError } from '../../shared/auth/errors.js';
import { isScope, type Scope } from '../../shared/auth/principal.js';
import { validateTokenName, validateTokenOwner } from '../../shared/auth/token-request.js';
import { SIGNING_SECRET_BYTES } from './signing-key.js';
import { errorMessage } from '../../shared/errors/error-message.js';

export const AUTH_FILE_NAME = 'auth.json';
/** The layout this code writes; it also reads the two before it. Any other number is refused, not guessed at. */
export const AUTH_FILE_VERSION = 3;
/** The layout before the revoked ids were kept: the same without `revoked`. */
export const PREVIOUS_AUTH_FILE_VERSION = 2;
/** 0.1.0's layout: version 2 plus the signing secret, which now lives in its own file (signing-secret-file.ts). */
export const LEGACY_AUTH_FILE_VERSION = 1;
/** A larger file cannot be ours (MAX_STORED_TOKENS tokens take a few hundred kilobytes). */
export const MAX_AUTH_FILE_BYTES = 4 * 1024 * 1024;
/** Most tokens the store keeps; the file, every snapshot and every worker's map stay small. */
export const MAX_STORED_TOKENS = 1000;
/**
 * Most revoked token ids the file remembers (the newest): at most 33 bytes each in the file. A
 * node of a fleet never brings one of them back (supervisor/fleet/README.md, "Tokens").
 */
export const MAX_REMEMBERED_REVOCATIONS = 10_000;

export interface StoredToken {
  id: string;
  name: string;
  scope: Scope;
  /** SHA-256 of the secret, lowercase hex. */
  digest: string;
  /** Unix seconds. */
  createdAt: number;
  /** The party it was issued to; absent for the operator's own (auth.json keeps no empty field). */
  owner?: string;
}

/**
 * auth.json, version 3. Digests only: the admin password as bcrypt over base64(SHA-256(password))
 * (null while ADMIN_PASSWORD is set, which is never written), token secrets as SHA-256 hex; and
 * the ids of revoked tokens, oldest first, so that no copy of a token elsewhere (another node's
 * auth.json, a fleet's Redis) brings one back. Version 2 was the same without `revoked`.
 */
export interface AuthFileContents {
  version: typeof AUTH_FILE_VERSION;
  admin: { passwordHash: string | null };
  tokens: StoredToken[];
  revoked: string[];
}

export interface ParsedAuthFile {
  contents: AuthFileContents;
  /** The signing secret a version-1 file carried (to be moved to its own file); null for version 2. */
  legacySigningSecret: Buffer | null;
}

/** Why a file was refused; the store wraps it into AuthStoreCorruptError with the file name. */
export class AuthFileShapeError extends Error {}

const TOKEN_ID = /^[A-Za-z0-9]{1,32}$/;
const DIGEST = /^[0-9a-f]{64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function serializeAuthFile(contents: AuthFileContents): string {
  return JSON.stringify(contents, null, 2) + '\n';
}

/** Parses and checks every field; throws AuthFileShapeError naming the first problem. */
export function parseAuthFile(text: string): ParsedAuthFile {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new AuthFileShapeError(`is not valid JSON (${errorMessage(e)})`);
  }
  const version = typeof value === 'object' && value !== null ? (value as Record<string, unknown>).version : undefined;
  if (version !== AUTH_FILE_VERSION && version !== PREVIOUS_AUTH_FILE_VERSION && version !== LEGACY_AUTH_FILE_VERSION) {
    throw new AuthFileShapeError(
      `has version ${JSON.stringify(version)}, and this exitpool reads only versions ${LEGACY_AUTH_FILE_VERSION} to ${AUTH_FILE_VERSION}`,
    );
  }
  const legacy = version === LEGACY_AUTH_FILE_VERSION;
  const keys = legacy ? ['version', 'signingSecret', 'admin', 'tokens'] : version === PREVIOUS_AUTH_FILE_VERSION ? ['version', 'admin', 'tokens'] : ['version', 'admin', 'tokens', 'revoked'];
  const root = objectWithKeys(value, keys, 'the top level');
  let legacySigningSecret: Buffer | null = null;
  if (legacy) {
    const signingSecret = root.signingSecret;
    if (typeof signingSecret !== 'string' || !BASE64.test(signingSecret) || Buffer.from(signingSecret, 'base64').length !== SIGNING_SECRET_BYTES) {
      throw new AuthFileShapeError(`has a signingSecret that is not ${SIGNING_SECRET_BYTES} bytes of base64`);
    }
    legacySigningSecret = Buffer.from(signingSecret, 'base64');
  }
  const admin = objectWithKeys(root.admin, ['passwordHash'], 'admin');
  const passwordHash = admin.passwordHash;
  if (passwordHash !== null && (typeof passwordHash !== 'string' || !BCRYPT_HASH_PATTERN.test(passwordHash))) {
    throw new AuthFileShapeError('has an admin.passwordHash that is neither null nor a bcrypt hash');
  }
  if (!Array.isArray(root.tokens)) throw new AuthFileShapeError('has tokens that are not a list');
  if (root.tokens.length > MAX_STORED_TOKENS) throw new AuthFileShapeError(`holds more than ${MAX_STORED_TOKENS} tokens`);
  const tokens = root.tokens.map((t, i) => parseStoredToken(t, `tokens[${i}]`));
  const ids = new Set(tokens.map((t) => t.id));
  if (ids.size !== tokens.length) throw new AuthFileShapeError('holds two tokens with the same id');
  if (new Set(tokens.map((t) => t.digest)).size !== tokens.length) throw new AuthFileShapeError('holds two tokens with the same digest');
  const revoked = version === AUTH_FILE_VERSION ? parseRevokedIds(root.revoked) : [];
  const stillHeld = tokens.find((t) => revoked.includes(t.id));
  if (stillHeld !== undefined) throw new AuthFileShapeError(`holds the token ${stillHeld.id}, which it also lists as revoked`);
  return { contents: { version: AUTH_FILE_VERSION, admin: { passwordHash }, tokens, revoked }, legacySigningSecret };
}

/** The revoked ids of a version-3 file: token ids, each once, at most MAX_REMEMBERED_REVOCATIONS. */
function parseRevokedIds(value: unknown): string[] {
  if (!Array.isArray(value)) throw new AuthFileShapeError('has revoked ids that are not a list');
  if (value.length > MAX_REMEMBERED_REVOCATIONS) throw new AuthFileShapeError(`remembers more than ${MAX_REMEMBERED_REVOCATIONS} revoked ids`);
  const ids = value.map((id, i) => {
    if (typeof id !== 'string' || !isTokenId(id)) throw new AuthFileShapeError(`has a bad id in revoked[${i}]`);
    return id;
  });
  if (new Set(ids).size !== ids.length) throw new AuthFileShapeError('lists one revoked id twice');
  return ids;
}

/** Whether `id` has the shape of a token id (auth.json's, the fleet's revoked ids). */
export function isTokenId(id: string): boolean {
  return TOKEN_ID.test(id);
}

/** One token record, every field checked (auth.json's, and the fleet's in Redis); throws AuthFileShapeError naming `where`. */
export function parseStoredToken(value: unknown, where: string): StoredToken {
  const t = objectWithKeys(value, ['id', 'name', 'scope', 'digest', 'createdAt'], where, ['owner']);
  if (typeof t.id !== 'string' || !TOKEN_ID.test(t.id)) throw new AuthFileShapeError(`has a bad id in ${where}`);
  let name: string;
  try {
    name = validateTokenName(t.name);
  } catch (e) {
    if (e instanceof AuthBadRequestError) throw new AuthFileShapeError(`has a bad name in ${where}: ${e.message}`);
    throw e;
  }
  if (!isScope(t.scope)) throw new AuthFileShapeError(`has a bad scope in ${where}`);
  if (typeof t.digest !== 'string' || !DIGEST.test(t.digest)) throw new AuthFileShapeError(`has a bad digest in ${where}`);
  if (typeof t.createdAt !== 'number' || !Number.isSafeInteger(t.createdAt) || t.createdAt < 0) {
    throw new AuthFileShapeError(`has a bad createdAt in ${where}`);
  }
  let owner: string;
  try {
    owner = t.owner === undefined ? '' : validateTokenOwner(t.owner);
  } catch (e) {
    if (e instanceof AuthBadRequestError) throw new AuthFileShapeError(`has a bad owner in ${where}: ${e.message}`);
    throw e;
  }
  return { id: t.id, name, scope: t.scope, digest: t.digest, createdAt: t.createdAt, ...(owner === '' ? {} : { owner }) };
}

/** Exactly these keys (and maybe the optional ones): an unknown key would be dropped by the next save, so it is refused instead. */
function objectWithKeys(value: unknown, keys: readonly string[], where: string, optional: readonly string[] = []): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AuthFileShapeError(`has the wrong shape: ${where} is not an object`);
  }
  const record = value as Record<string, unknown>;
  const present = Object.keys(record);
  const unknown = present.filter((k) => !keys.includes(k) && !optional.includes(k));
  if (unknown.length > 0) throw new AuthFileShapeError(`has the wrong shape: unknown field ${JSON.stringify(unknown[0])} in ${where}`);
  const missing = keys.filter((k) => !Object.hasOwn(record, k));
  if (missing.length > 0) throw new AuthFileShapeError(`has the wrong shape: field ${JSON.stringify(missing[0])} missing in ${where}`);
  return record;
}
