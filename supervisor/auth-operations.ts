import type { Logger } from '../shared/logger.js';
import { tokenIssuedEvent, tokenRevokedEvent } from '../shared/auth/auth-audit.js';
import { parseTokenCreateBody } from '../shared/auth/token-request.js';
import type { CreatedToken } from '../shared/auth/token-record.js';
import type { ActionResult } from '../shared/ipc/protocol.js';
import type { AuditLog } from './audit/audit-log.js';
import type { AuthStore, CredentialSnapshots } from './auth/auth-store.js';
import type { WorkerManager } from './cluster/worker-manager.js';

/** How long a worker may take to acknowledge a new credential snapshot. */
export const CREDENTIAL_PUSH_TIMEOUT_MS = 3000;

function refusal(e: unknown): { ok: false; error: { status: 400 | 404 | 409 | 500 | 503; message: string } } {
  const status = (e as { status?: unknown }).status;
  const known = status === 400 || status === 404 || status === 409 || status === 503 ? status : 500;
  return { ok: false, error: { status: known, message: (e as Error).message } };
}

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
      h.endpoint
        .request('credentials.update', h.role === 'api' ? snapshots.api : snapshots.proxy, CREDENTIAL_PUSH_TIMEOUT_MS)
        .catch((e: unknown) => {
          // A worker that is gone gets the current snapshot when it is re-forked (credentials.get).
          if ((e as Error).name !== 'IpcPeerGoneError') throw e;
        }),
    );
    await Promise.all(acks);
  }

  async create(body: unknown): Promise<ActionResult<CreatedToken>> {
    try {
      const request = parseTokenCreateBody(body);
      const { token, snapshots } = await this.store.createToken(request);
      await this.push(snapshots);
      this.audit.record(tokenIssuedEvent(token));
      return { ok: true, value: token };
    } catch (e) {
      return refusal(e);
    }
  }

  async revoke(id: string): Promise<ActionResult<null>> {
    let revocation;
    try {
      revocation = this.store.revokeToken(id);
    } catch (e) {
      return refusal(e);
    }
    this.audit.record(tokenRevokedEvent(revocation.token));
    try {
      await this.push(revocation.snapshots);
    } catch (e) {
      this.log.error('a worker did not acknowledge the revocation', { token: id, error: (e as Error).message });
      return { ok: false, error: { status: 503, message: 'revocation not acknowledged by every worker; retry' } };
    }
    try {
      await revocation.persisted;
    } catch (e) {
      this.log.error('token revoked but auth.json could not be written', { token: id, error: (e as Error).message });
      return { ok: false, error: { status: 500, message: `token revoked (in force now) but not saved: ${(e as Error).message}` } };
    }
    return { ok: true, value: null };
  }
}
