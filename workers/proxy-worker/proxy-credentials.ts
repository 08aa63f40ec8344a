import type { ProxyCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import { isNewerSnapshot } from '../../shared/auth/credential-snapshot.js';
import { TokenVerifier } from '../../shared/auth/token-verifier.js';
import type { WorkerEndpoint } from '../../shared/ipc/protocol.js';
import type { CredentialPolicy } from '../proxy/proxy-types.js';

/**
 * The proxy worker's token check: a local verifier built from the supervisor's snapshot
 * (no IPC, no I/O per connection). A new snapshot replaces it before the supervisor gets its
 * acknowledgement, so a revocation is in force everywhere before the API answers.
 */
export class ProxyCredentials {
  private verifier: TokenVerifier | null = null;
  /** The ids of the snapshot's tokens: a hop credential carrying one that is gone is refused (hop-credentials.ts). */
  private ids: ReadonlySet<string> = new Set();

  constructor(
    private readonly authDisabled: boolean,
    /** Where new snapshots arrive from the supervisor; null for a policy that only installs its own (the start-up warm-up). */
    endpoint: WorkerEndpoint | null,
  ) {
    endpoint?.handle('credentials.update.proxy', (snapshot) => {
      this.install(snapshot);
      return { version: this.verifier?.version ?? 0 };
    });
  }

  install(snapshot: ProxyCredentialSnapshot): void {
    if (this.verifier && !isNewerSnapshot({ version: this.verifier.version }, snapshot)) return;
    this.verifier = TokenVerifier.fromSnapshot(snapshot);
    this.ids = new Set(snapshot.tokens.map((t) => t.id));
  }

  /**
   * Whether a credential a hop carries is one this node would admit now: a token it holds, or
   * (only under AUTH_DISABLED here too) a client address.
   */
  admits(credential: string): boolean {
    if (credential.startsWith('token:')) return this.ids.has(credential.slice('token:'.length));
    return this.authDisabled && credential.startsWith('address:');
  }

  policy(): CredentialPolicy {
    return {
      required: !this.authDisabled,
      check: (_username, password) => {
        // Fail closed: before the first snapshot arrives nothing verifies.
        const outcome = this.verifier?.authenticateProxy(password) ?? { ok: false as const, reason: 'missing' as const };
        // The listener logs a refusal at warn ("credential refused"); it is never an audit event.
        if (!outcome.ok) return { ok: false };
        return { ok: true, credential: outcome.principal.kind === 'token' ? `token:${outcome.principal.id}` : 'anonymous' };
      },
    };
  }
}
