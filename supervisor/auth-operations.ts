import type { Logger } from '../shared/logger.js';
import { tokenIssuedEvent, tokenRevokedEvent } from '../shared/auth/auth-audit.js';
import type { TokenCreateRequest } from '../shared/auth/token-request.js';
import type { CreatedToken } from '../shared/auth/token-record.js';
import { ExitpoolError } from '../shared/errors/catalogue.js';
import { IpcPeerGoneError } from '../shared/ipc/errors.js';
import type { AuditLog } from './audit/audit-log.js';
import type { AuthStore, CredentialSnapshots } from './auth/auth-store.js';
import type { WorkerManager } from './cluster/worker-manager.js';

/** How long a worker may take to acknowledge a new credential snapshot. */
export const CREDENTIAL_PUSH_TIMEOUT_MS = 3000;

/**
 * Token issue and revoke, and the push of credential snapshots to every worker. A revocation
 * is answered only after every live worker acknowledged the snapshot without the token, so
 * it is in force before the API replies (and before it reaches disk).
 */
export class AuthOperations {
  constructor(
    private readonly store: AuthStore,
    private readonly workers: WorkerManager,
    private readonly audit: AuditLog,
    private readonly log: Logger,
  ) {}

  async push(snapshots: CredentialSnapshots): Promise<void> {
    const acks = this.workers.handles().map((h) =>
      (h.role === 'api'
        ? h.endpoint.request('credentials.update.api', snapshots.api, CREDENTIAL_PUSH_TIMEOUT_MS)
        : h.endpoint.request('credentials.update.proxy', snapshots.proxy, CREDENTIAL_PUSH_TIMEOUT_MS)
      ).catch((e: unknown) => {
        // A worker that is gone gets the current snapshot when it is re-forked (credentials.api / .proxy).
        if (!(e instanceof IpcPeerGoneError)) throw e;
      }),
    );
    await Promise.all(acks);
  }

  /** Throws the store's typed errors (TokenLimitError, AuthStorePersistError): nothing was kept then. */
  async create(request: TokenCreateRequest): Promise<CreatedToken> {
    const { token, snapshots } = await this.store.createToken(request);
    await this.push(snapshots);
    this.audit.record(tokenIssuedEvent(token));
    return token;
  }

  /**
   * Throws TokenNotFoundError / ConfigTokenNotRevocableError before anything changed;
   * EXITPOOL_NOT_ACKNOWLEDGED or EXITPOOL_NOT_PERSISTED after the revocation is in force.
   */
  async revoke(id: string): Promise<null> {
    const revocation = this.store.revokeToken(id);
    this.audit.record(tokenRevokedEvent(revocation.token));
    try {
      await this.push(revocation.snapshots);
    } catch (e) {
      this.log.error('a worker did not acknowledge the revocation', { token: id, error: (e as Error).message });
      throw new ExitpoolError('EXITPOOL_NOT_ACKNOWLEDGED', 'revocation not acknowledged by every worker; retry', { cause: e });
    }
    try {
      await revocation.persisted;
    } catch (e) {
      this.log.error('token revoked but auth.json could not be written', { token: id, error: (e as Error).message });
      throw new ExitpoolError('EXITPOOL_NOT_PERSISTED', `token revoked (in force now) but not saved: ${(e as Error).message}`, { cause: e });
    }
    return null;
  }
}
