import { constants as fsConstants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { ADMIN_PASSWORD_BCRYPT_COST, hashAdminPassword } from '../../shared/auth/admin-password.js';
import type { ApiCredentialSnapshot, ProxyCredentialSnapshot, SnapshotToken } from '../../shared/auth/credential-snapshot.js';
import { AuthBadRequestError } from '../../shared/auth/errors.js';
import { isScope, type Scope } from '../../shared/auth/principal.js';
import { digestTokenSecret } from '../../shared/auth/token-format.js';
import type { CreatedToken, TokenRecord, TokenSource } from '../../shared/auth/token-record.js';
import { validateTokenName, validateTokenOwner, type TokenCreateRequest } from '../../shared/auth/token-request.js';
import type { Config } from '../../shared/config/config.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { childLogger, type Logger } from '../../shared/logger.js';
import { writeFileAtomic, type AtomicWriteFileSystem } from './atomic-write.js';
import {
  AUTH_FILE_NAME,
  AUTH_FILE_VERSION,
  MAX_REMEMBERED_REVOCATIONS,
  MAX_STORED_TOKENS,
  serializeAuthFile,
  type AuthFileContents,
  type StoredToken,
} from './auth-file.js';
import { configTokenFrom, type ConfigToken } from './config-token.js';
import { generateAdminPassword, generateTokenId, generateTokenSecret } from './credential-generator.js';
import {
  AuthStorePersistError,
  ConfigTokenNotRevocableError,
  TokenLimitError,
  TokenNotFoundError,
} from './errors.js';
import { AUTH_FILE_MODE, readAuthFile } from './read-auth-file.js';
import { SerialQueue } from './serial-queue.js';
import { deriveSigningKey, type AdminPasswordSource } from './signing-key.js';
import { loadSigningSecret } from './signing-secret-file.js';

/** Name of the proxy token generated on first boot. */
export const FIRST_BOOT_TOKEN_NAME = 'generated on first boot';

export type AuthStoreConfig = Pick<Config, 'adminUser' | 'adminPassword' | 'proxyToken' | 'authDisabled' | 'dataDir'> & {
  /** SIGNING_SECRET; unset means the secret kept in DATA_DIR/signing.key. */
  signingSecret?: string | null;
};

export interface AuthStoreOptions {
  config: AuthStoreConfig;
  log?: Logger;
  /** bcrypt cost for a generated or configured admin password; tests lower it. */
  bcryptCost?: number;
  /** Clock (ms) for created_at. */
  now?: () => number;
  /** Fault injection for tests; the real file system otherwise. */
  fileSystem?: AtomicWriteFileSystem;
}

/** Cleartext made at this start, returned once for the caller to print; the store keeps none. */
export interface GeneratedCredentials {
  adminPassword: string | null;
  proxyToken: CreatedToken | null;
}

export interface CredentialSnapshots {
  /** For proxy workers: token digests and scopes only. */
  proxy: ProxyCredentialSnapshot;
  /** For the API worker only: also the admin user, the password hash and the signing key. */
  api: ApiCredentialSnapshot;
}

export interface TokenCreation {
  /** Carries the secret: hand it out once, then drop it. */
  token: CreatedToken;
  /** As kept (digest, no secret): what a fleet shares. */
  stored: StoredToken;
  snapshots: CredentialSnapshots;
}

export interface TokenRevocation {
  token: TokenRecord;
  /** Already without the token: push these to the workers and await their acks. */
  snapshots: CredentialSnapshots;
  /** The save, already under way. Rejects with AuthStorePersistError; the revocation stands in memory. */
  persisted: Promise<void>;
}

/**
 * Credentials generated at open and not yet in auth.json: they reach the file (and the log) only
 * once the start has succeeded (`commitGenerated`), so a start that fails leaves no credentials
 * that were never shown, and the next start generates and shows its own.
 */
interface PendingGenerated {
  generated: GeneratedCredentials;
  /** Whether auth.json holds them already (a token issued or a save made before the commit). */
  saved: boolean;
}

/** What does not change for the life of a store (the admin credentials change only by restart). */
interface FixedCredentials {
  /** The stored digest (null while ADMIN_PASSWORD is set). */
  storedPasswordHash: string | null;
  /** What the API worker compares against: the stored hash, or a hash of ADMIN_PASSWORD made at start. */
  effectivePasswordHash: string;
  /** Derived HS256 key, base64. */
  signingKey: string;
}

/**
 * The supervisor's credential store: owns auth.json in DATA_DIR and produces the immutable
 * snapshots the workers verify against.
 *
 * Ordering, chosen so that neither operation can leave memory and disk disagreeing dangerously:
 * - Revoke is memory first: `revokeToken` removes the token and returns the new snapshots at
 *   once (synchronously), with the save already started (`persisted`). The caller pushes the
 *   snapshots, awaits the workers' acks, then awaits `persisted` and reports a failure to save.
 *   The token stays revoked in memory either way.
 * - Create is disk first: the token joins memory (and so any snapshot) only after auth.json holds
 *   it. If the save fails, nothing changed and the secret is dropped, so no one ever holds a
 *   token that a restart would forget. (An unsaved token needs no rollback because it was never
 *   added.) The caller then pushes the snapshots before returning the secret.
 * All saves go through one queue and write the whole current state, so concurrent creates and
 * revokes never lose one another, and a later successful save repairs an earlier failed one.
 */
export class AuthStore {
  private version = 1;
  private cached: CredentialSnapshots | null = null;
  private readonly queue = new SerialQueue();

  /** auth.json's path. */
  readonly file: string;
  private readonly config: AuthStoreConfig;
  private readonly fixed: FixedCredentials;
  private readonly tokens: Map<string, StoredToken>;
  /**
   * Ids of tokens revoked here or, on a node of a fleet, anywhere this node heard of (oldest
   * first, at most MAX_REMEMBERED_REVOCATIONS): kept in auth.json, never issued again, and never
   * taken back from a list someone else holds (supervisor/fleet/README.md, "Tokens").
   */
  private readonly revoked: Set<string>;
  /**
   * Ids of tokens issued while AUTH_DISABLED: anyone who can reach the API could issue them (there
   * is no credential to check), so they are never written to auth.json and end with this process.
   * Listed with source `auth-disabled`.
   */
  private readonly memoryOnly = new Set<string>();
  private readonly configToken: ConfigToken | null;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly fileSystem: AtomicWriteFileSystem | undefined;
  private pending: PendingGenerated | null = null;
  /** The admin password digest auth.json held when this store last read or wrote it. */
  private diskPasswordHash: string | null;
  /**
   * The digest this store writes: its own, until a save finds that auth.json holds another one
   * than it last saw there (`exitpool reset-admin-password` wrote it while the service ran, for
   * the next start): from then on that one, so no save of this service undoes it.
   */
  private passwordHashToKeep: string | null;

  private constructor(parts: {
    file: string;
    config: AuthStoreConfig;
    fixed: FixedCredentials;
    tokens: StoredToken[];
    revoked: string[];
    configToken: ConfigToken | null;
    log: Logger;
    now: () => number;
    fileSystem: AtomicWriteFileSystem | undefined;
  }) {
    this.file = parts.file;
    this.config = parts.config;
    this.fixed = parts.fixed;
    this.tokens = new Map(parts.tokens.map((t) => [t.id, t]));
    this.revoked = new Set(parts.revoked);
    this.configToken = parts.configToken;
    this.log = parts.log;
    this.now = parts.now;
    this.fileSystem = parts.fileSystem;
    this.diskPasswordHash = parts.fixed.storedPasswordHash;
    this.passwordHashToKeep = parts.fixed.storedPasswordHash;
  }

  /**
   * Reads auth.json, applies ADMIN_PASSWORD, and returns the store with any cleartext generated
   * at this start. Credentials generated here reach auth.json only by `commitGenerated()`, once
   * the start has succeeded. Throws AuthStoreCorruptError for an unusable file (never touching
   * it) and AuthStorePersistError when DATA_DIR cannot be written or a needed save fails.
   */
  static async open(options: AuthStoreOptions): Promise<{ store: AuthStore; generated: GeneratedCredentials }> {
    const { config } = options;
    const log = options.log ?? childLogger({ component: 'auth' });
    const now = options.now ?? Date.now;
    const cost = options.bcryptCost ?? ADMIN_PASSWORD_BCRYPT_COST;
    const file = path.join(config.dataDir, AUTH_FILE_NAME);
    const generated: GeneratedCredentials = { adminPassword: null, proxyToken: null };

    await fsp.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    const parsed = await readAuthFile(file, log);
    const existing = parsed?.contents ?? null;
    // Before auth.json is rewritten without it, so a 0.1.0 file's secret is never lost.
    const signing = await loadSigningSecret({
      dataDir: config.dataDir,
      operatorSecret: config.signingSecret ?? null,
      legacySecret: parsed?.legacySigningSecret ?? null,
      log,
      fileSystem: options.fileSystem,
    });
    const configToken = config.proxyToken === null ? null : configTokenFrom(config.proxyToken, now());
    let changed = false;
    let contents: AuthFileContents;
    if (existing === null) {
      const secret = generateTokenSecret();
      const taken = new Set(configToken === null ? [] : [configToken.id]);
      const token: StoredToken = {
        id: generateTokenId(taken),
        name: FIRST_BOOT_TOKEN_NAME,
        scope: 'proxy',
        digest: digestTokenSecret(secret),
        createdAt: unixSeconds(now()),
      };
      contents = { version: AUTH_FILE_VERSION, admin: { passwordHash: null }, tokens: [token], revoked: [] };
      generated.proxyToken = { ...toRecord(token, 'store'), secret };
      changed = true;
    } else {
      contents = existing;
      // A 0.1.0 file: rewritten without its signing secret (now in signing.key, or unused under SIGNING_SECRET).
      if (parsed?.legacySigningSecret != null) changed = true;
    }

    let passwordSource: AdminPasswordSource;
    let effectivePasswordHash: string;
    if (config.adminPassword !== null) {
      if (contents.admin.passwordHash !== null) {
        contents = { ...contents, admin: { passwordHash: null } };
        changed = true;
        log.info('ADMIN_PASSWORD is set: cleared the stored password digest', { file });
      }
      passwordSource = { kind: 'env', password: config.adminPassword };
      effectivePasswordHash = await hashAdminPassword(config.adminPassword, cost);
    } else {
      if (contents.admin.passwordHash === null) {
        generated.adminPassword = generateAdminPassword();
        contents = { ...contents, admin: { passwordHash: await hashAdminPassword(generated.adminPassword, cost) } };
        changed = true;
      }
      const hash = contents.admin.passwordHash as string;
      passwordSource = { kind: 'stored', hash };
      effectivePasswordHash = hash;
    }

    const generatedAny = generated.adminPassword !== null || generated.proxyToken !== null;
    if (generatedAny) {
      // Written at the commit; that it can be written is known now, before anything starts.
      try {
        await fsp.access(config.dataDir, fsConstants.W_OK);
      } catch (e) {
        throw new AuthStorePersistError(file, e);
      }
    } else if (changed) {
      try {
        await writeFileAtomic(file, serializeAuthFile(contents), { mode: AUTH_FILE_MODE, fileSystem: options.fileSystem });
      } catch (e) {
        throw new AuthStorePersistError(file, e);
      }
      log.info('updated credential store', { file });
    }

    const signingKey = deriveSigningKey(
      signing.secret,
      config.adminUser,
      passwordSource,
      config.authDisabled,
    ).toString('base64');
    const store = new AuthStore({
      file,
      config,
      fixed: {
        storedPasswordHash: contents.admin.passwordHash,
        effectivePasswordHash,
        signingKey,
      },
      tokens: contents.tokens,
      revoked: contents.revoked,
      configToken,
      log,
      now,
      fileSystem: options.fileSystem,
    });
    if (generatedAny) {
      store.pending = { generated, saved: false };
      // Not in auth.json yet: the digest a save should compare against is the file's own.
      store.diskPasswordHash = existing === null ? null : existing.admin.passwordHash;
    }
    return { store, generated };
  }

  /**
   * The start succeeded: credentials generated at open are written to auth.json (if a save has
   * not already) and printed, once. Never throws: when the file cannot be written the
   * credentials still work until this process stops, which the error line says, and the next
   * start generates others.
   */
  async commitGenerated(): Promise<void> {
    const pending = this.pending;
    if (pending === null) return;
    this.pending = null;
    let kept = pending.saved;
    if (!kept) {
      try {
        await this.queue.run(() => this.save([...this.persistedTokens()]));
        kept = true;
        this.log.info('created credential store', { file: this.file });
      } catch (e) {
        this.log.error('the generated credentials could not be stored: they work until this process stops, and the next start generates others', {
          file: this.file,
          error: errorMessage(e),
        });
      }
    }
    const note = kept ? 'shown once; stored as a digest' : 'not stored: valid until this process stops';
    const { adminPassword, proxyToken } = pending.generated;
    if (adminPassword !== null) this.log.warn(`generated dashboard credentials (${note})`, { user: this.config.adminUser, password: adminPassword });
    if (proxyToken !== null) this.log.warn(`generated proxy token (${note})`, { token: proxyToken.secret, id: proxyToken.id });
  }

  /** The current snapshots; the same frozen objects until the next change. */
  snapshots(): CredentialSnapshots {
    if (this.cached === null) {
      const all = this.configToken === null ? [...this.tokens.values()] : [this.configToken, ...this.tokens.values()];
      const tokens: SnapshotToken[] = all.map((t) => Object.freeze({ id: t.id, scope: t.scope, digest: t.digest }));
      Object.freeze(tokens);
      const proxy: ProxyCredentialSnapshot = Object.freeze({ version: this.version, authDisabled: this.config.authDisabled, tokens });
      const api: ApiCredentialSnapshot = Object.freeze({
        version: this.version,
        authDisabled: this.config.authDisabled,
        tokens,
        adminUser: this.config.adminUser,
        passwordHash: this.fixed.effectivePasswordHash,
        signingKey: this.fixed.signingKey,
      });
      this.cached = { proxy, api };
    }
    return this.cached;
  }

  /** GET /api/tokens: PROXY_TOKEN first (source `config`), then issued tokens oldest first. */
  listTokens(): TokenRecord[] {
    const stored = [...this.tokens.values()].map((t) => toRecord(t, this.memoryOnly.has(t.id) ? 'auth-disabled' : 'store'));
    return this.configToken === null ? stored : [toRecord(this.configToken, 'config'), ...stored];
  }

  /**
   * The party a token was issued to ('' for the operator's own: PROXY_TOKEN, the first-boot
   * token, and every token issued without an owner); null for a token this node does not know.
   */
  ownerOf(id: string): string | null {
    if (this.configToken?.id === id) return '';
    const token = this.tokens.get(id);
    return token === undefined ? null : (token.owner ?? '');
  }

  /**
   * POST /api/tokens. Resolves after auth.json holds the token (under AUTH_DISABLED: at once, memory only). Throws AuthBadRequestError (400),
   * TokenLimitError (409) or AuthStorePersistError (nothing changed).
   */
  async createToken(request: TokenCreateRequest): Promise<TokenCreation> {
    const name = validateTokenName(request.name);
    if (!isScope(request.scope)) throw new AuthBadRequestError("scope must be 'proxy' or 'admin'");
    const scope: Scope = request.scope;
    const owner = validateTokenOwner(request.owner ?? '');
    return this.queue.run(async () => {
      if (this.tokens.size >= MAX_STORED_TOKENS) throw new TokenLimitError(MAX_STORED_TOKENS);
      const secret = generateTokenSecret();
      // A revoked id is never given again: the fleet keeps it out of every list for good.
      const taken = new Set([...this.tokens.keys(), ...this.revoked]);
      if (this.configToken !== null) taken.add(this.configToken.id);
      const token: StoredToken = {
        id: generateTokenId(taken),
        name,
        scope,
        digest: digestTokenSecret(secret),
        createdAt: unixSeconds(this.now()),
        ...(owner === '' ? {} : { owner }),
      };
      const source: TokenSource = this.config.authDisabled ? 'auth-disabled' : 'store';
      if (source === 'store') await this.save([...this.persistedTokens(), token]);
      else this.memoryOnly.add(token.id);
      this.tokens.set(token.id, token);
      this.changed();
      this.log.info('token issued', { id: token.id, scope, source });
      return { token: { ...toRecord(token, source), secret }, stored: token, snapshots: this.snapshots() };
    });
  }

  /**
   * DELETE /api/tokens/{id}: revoked in memory at once, saved in the background (see the class
   * comment). Throws TokenNotFoundError (404) or ConfigTokenNotRevocableError (409) synchronously.
   */
  revokeToken(id: string): TokenRevocation {
    if (this.configToken !== null && this.configToken.id === id && !this.tokens.has(id)) {
      throw new ConfigTokenNotRevocableError(id);
    }
    const token = this.tokens.get(id);
    if (token === undefined) throw new TokenNotFoundError(id);
    const source: TokenSource = this.memoryOnly.delete(id) ? 'auth-disabled' : 'store';
    this.tokens.delete(id);
    if (source === 'store') this.remember([id]);
    this.changed();
    this.log.info('token revoked', { id, scope: token.scope, source });
    const persisted = source === 'store' ? this.queue.coalesced(() => this.save([...this.persistedTokens()])) : Promise.resolve();
    // The caller awaits this only after pushing the snapshots; meanwhile a failure must not
    // count as an unhandled rejection. The caller still sees it when it awaits.
    persisted.catch(() => undefined);
    return { token: toRecord(token, source), snapshots: this.snapshots(), persisted };
  }

  /** The issued tokens auth.json keeps (not PROXY_TOKEN, not those of AUTH_DISABLED). */
  issuedTokens(): StoredToken[] {
    return this.persistedTokens();
  }

  /** Ids of every token revoked here or heard of as revoked, oldest first (what a fleet is told, supervisor/fleet). */
  revokedIds(): string[] {
    return [...this.revoked];
  }

  /**
   * Revocations made elsewhere (another node of the fleet): each id is remembered as revoked,
   * and a token held here under one of them is dropped. The new snapshots when a token went,
   * else null; auth.json follows in the background when anything was new.
   */
  rememberRevoked(ids: readonly string[]): CredentialSnapshots | null {
    const fresh = ids.filter((id) => !this.revoked.has(id) && id !== this.configToken?.id);
    if (fresh.length === 0) return null;
    this.remember(fresh);
    const dropped = fresh.filter((id) => !this.memoryOnly.has(id) && this.tokens.delete(id));
    if (dropped.length > 0) {
      this.changed();
      this.log.info('tokens revoked on another node dropped', { ids: dropped });
    }
    if (this.pending === null) this.queue.coalesced(() => this.save([...this.persistedTokens()])).catch(() => undefined);
    return dropped.length > 0 ? this.snapshots() : null;
  }

  /**
   * The issued tokens become exactly `tokens` (a fleet's, supervisor/fleet/fleet-tokens.ts),
   * except any this store knows as revoked, which never come back: the new snapshots, or null
   * when nothing changed. auth.json follows in the background, as for a revocation.
   */
  replaceIssued(offered: readonly StoredToken[]): CredentialSnapshots | null {
    const tokens = offered.filter((t) => !this.revoked.has(t.id));
    const current = this.persistedTokens();
    const same =
      current.length === tokens.length &&
      tokens.every((t) => {
        const mine = this.tokens.get(t.id);
        return mine !== undefined && !this.memoryOnly.has(t.id) && mine.digest === t.digest && mine.scope === t.scope && mine.name === t.name;
      });
    if (same) return null;
    for (const t of current) this.tokens.delete(t.id);
    for (const t of tokens.slice(0, MAX_STORED_TOKENS)) if (!this.memoryOnly.has(t.id)) this.tokens.set(t.id, t);
    this.changed();
    this.log.info('issued tokens replaced by the fleet’s', { tokens: Math.min(tokens.length, MAX_STORED_TOKENS) });
    // Before the start has succeeded, the commit writes them with the generated credentials.
    if (this.pending === null) this.queue.coalesced(() => this.save([...this.persistedTokens()])).catch(() => undefined);
    return this.snapshots();
  }

  /** Resolves when every save queued so far has finished (for shutdown). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  private persistedTokens(): StoredToken[] {
    return [...this.tokens.values()].filter((t) => !this.memoryOnly.has(t.id));
  }

  private changed(): void {
    this.version++;
    this.cached = null;
  }

  /** Adds revoked ids, the oldest forgotten past MAX_REMEMBERED_REVOCATIONS. */
  private remember(ids: readonly string[]): void {
    for (const id of ids) {
      this.revoked.delete(id);
      this.revoked.add(id);
    }
    for (const oldest of this.revoked) {
      if (this.revoked.size <= MAX_REMEMBERED_REVOCATIONS) break;
      this.revoked.delete(oldest);
    }
  }

  private async save(tokens: StoredToken[]): Promise<void> {
    const passwordHash = await this.passwordHashToWrite();
    const contents: AuthFileContents = {
      version: AUTH_FILE_VERSION,
      admin: { passwordHash },
      tokens,
      revoked: [...this.revoked],
    };
    try {
      await writeFileAtomic(this.file, serializeAuthFile(contents), { mode: AUTH_FILE_MODE, fileSystem: this.fileSystem });
    } catch (e) {
      const error = new AuthStorePersistError(this.file, e);
      this.log.error('could not save the credential store', { file: this.file, error: error.message });
      throw error;
    }
    this.diskPasswordHash = passwordHash;
    // Whatever was generated at open is in the file now.
    if (this.pending !== null) this.pending.saved = true;
  }

  /**
   * This store's password digest, unless auth.json holds another one than this store last saw
   * there: `exitpool reset-admin-password` put it there for the next start, and a save of this
   * running service must not undo it (this service goes on with its own until it restarts).
   */
  private async passwordHashToWrite(): Promise<string | null> {
    let onDisk: string | null;
    try {
      const parsed = await readAuthFile(this.file, this.log);
      if (parsed === null) return this.passwordHashToKeep;
      onDisk = parsed.contents.admin.passwordHash;
    } catch {
      // Unreadable now: this save replaces it with what this store knows.
      return this.passwordHashToKeep;
    }
    if (onDisk !== null && onDisk !== this.diskPasswordHash && onDisk !== this.passwordHashToKeep) {
      this.log.info('auth.json holds an admin password digest set outside this service (reset-admin-password): kept for the next start', { file: this.file });
      this.passwordHashToKeep = onDisk;
    }
    return this.passwordHashToKeep;
  }
}

function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

function toRecord(token: StoredToken, source: TokenSource): TokenRecord {
  return { id: token.id, name: token.name, scope: token.scope, source, created_at: token.createdAt, owner: token.owner ?? '' };
}
