import type { Logger } from '../shared/logger.js';
import { tokenIssuedEvent, tokenRevokedEvent } from '../shared/auth/auth-audit.js';
import type { TokenCreateRequest } from '../shared/auth/token-request.js';
import type { CreatedToken } from '../shared/auth/token-record.js';
import { ExitpoolError } from '../shared/errors/catalogue.js';
import { IpcPeerGoneError } from '../shared/ipc/errors.js';
import type { AuditLog } from './audit/audit-log.js';
import type { StoredToken } from './auth/auth-file.js';
import type { AuthStore, CredentialSnapshots } from './auth/auth-store.js';
import type { WorkerManager } from './cluster/worker-manager.js';
import { errorMessage } from '../shared/errors/error-message.js';

/** How long a worker may take to acknowledge a new credential snapshot. */
export const CREDENTIAL_PUSH_TIMEOUT_MS = 3000;

/**
 * Token issue and revoke, and the push of credential snapshots to every worker. A revocation
 * is answered only after every live worker acknowledged the snapshot without the token, so
 * it is in force before the API replies (and before it reaches disk).
 */
/** Where issued and revoked tokens go besides this node (a fleet's shared list, supervisor/fleet/fleet-tokens.ts). */
export interface SharedTokens {
  issued(token: StoredToken): Promise<void>;
  revoked(id: string): Promise<void>;
}

export class AuthOperations {
  /** Set on a node of a fleet: its tokens are every node's. */
  shared: SharedTokens | null = null;

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
    const { token, stored, snapshots } = await this.store.createToken(request);
    await this.push(snapshots);
    this.audit.record(tokenIssuedEvent(token));
    // Under AUTH_DISABLED a token lives in memory only: never the fleet's.
    if (this.shared && token.source === 'store') {
      try {
        await this.shared.issued(stored);
      } catch (e) {
        // A token only this node knows would vanish at the next reading of the fleet's list:
        // it is withdrawn, and the caller told nothing was created.
        this.log.error('token not shared with the other nodes; withdrawn', { token: token.id, error: errorMessage(e) });
        const withdrawn = this.store.revokeToken(token.id);
        await this.push(withdrawn.snapshots).catch(() => undefined);
        throw new ExitpoolError('EXITPOOL_FLEET_UNREACHABLE', `token not created: the other nodes could not be told (${errorMessage(e)}); retry`, { cause: e });
      }
    }
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
      this.log.error('a worker did not acknowledge the revocation', { token: id, error: errorMessage(e) });
      throw new ExitpoolError('EXITPOOL_NOT_ACKNOWLEDGED', 'revocation not acknowledged by every worker; retry', { cause: e });
    }
    if (this.shared && revocation.token.source === 'store') {
      try {
        await this.shared.revoked(id);
      } catch (e) {
        this.log.error('token revoked on this node but the other nodes could not be told', { token: id, error: errorMessage(e) });
        throw new ExitpoolError('EXITPOOL_FLEET_UNREACHABLE', `token revoked on this node (in force here) but the other nodes could not be told: ${errorMessage(e)}; they drop it when Redis answers again`, { cause: e });
      }
    }
    try {
      await revocation.persisted;
    } catch (e) {
      this.log.error('token revoked but auth.json could not be written', { token: id, error: errorMessage(e) });
      throw new ExitpoolError('EXITPOOL_NOT_PERSISTED', `token revoked (in force now) but not saved: ${errorMessage(e)}`, { cause: e });
    }
    return null;
  }
}
