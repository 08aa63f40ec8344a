import { AuthError } from '../../shared/auth/errors.js';

/**
 * auth.json exists but cannot be used: unreadable, not a regular file, not JSON, wrong shape or
 * an unknown version. The service refuses to start and the file is never written over, so the
 * operator can inspect or restore it.
 */
export class AuthStoreCorruptError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(
      `refusing to start: ${file} ${reason}. The file was left untouched; restore it from a backup, ` +
        'or move it away to have new credentials generated (and printed) on the next start.',
    );
    this.name = 'AuthStoreCorruptError';
  }
}

/**
 * Saving auth.json failed (disk full, read-only, directory gone). For a token creation nothing
 * changed: the token was not kept and its secret was never handed out. For a revocation the
 * token stays revoked in memory (so in every worker) but would come back after a restart unless
 * a later save succeeds; every save writes the whole current state, so the next one repairs it.
 */
export class AuthStorePersistError extends AuthError {
  constructor(
    readonly file: string,
    override readonly cause: unknown,
  ) {
    super(`could not save ${file}: ${cause instanceof Error ? cause.message : String(cause)}`, 'EXITPOOL_NOT_PERSISTED');
  }
}

export class TokenNotFoundError extends AuthError {
  constructor(readonly id: string) {
    super('no such token', 'EXITPOOL_NO_SUCH_TOKEN');
  }
}

/** PROXY_TOKEN is configuration: remove the variable to retire it (409). */
export class ConfigTokenNotRevocableError extends AuthError {
  constructor(readonly id: string) {
    super('this token comes from PROXY_TOKEN and cannot be revoked through the API; unset the variable and restart', 'EXITPOOL_TOKEN_NOT_REVOCABLE');
  }
}

export class TokenLimitError extends AuthError {
  constructor(readonly limit: number) {
    super(`at most ${limit} tokens can be stored; revoke unused ones first`, 'EXITPOOL_TOKEN_LIMIT');
  }
}
