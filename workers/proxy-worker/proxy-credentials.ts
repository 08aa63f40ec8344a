import { createHash, timingSafeEqual } from 'node:crypto';
import type { ProxyCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import { isNewerSnapshot } from '../../shared/auth/credential-snapshot.js';
import { TokenVerifier } from '../../shared/auth/token-verifier.js';
import { FORWARD_DIGEST_ENV, type WorkerEndpoint } from '../../shared/ipc/protocol.js';
import type { CredentialPolicy } from '../proxy/proxy-types.js';

/**
 * The proxy worker's token check: a local verifier built from the supervisor's snapshot
 * (no IPC, no I/O per connection). A new snapshot replaces it before the supervisor gets its
 * acknowledgement, so a revocation is in force everywhere before the API answers.
 */
export class ProxyCredentials {
  private verifier: TokenVerifier | null = null;

  /** SHA-256 of the fleet's forwarding secret (FORWARD_DIGEST_ENV), as bytes; null outside a fleet. */
  private readonly forwardDigest: Buffer | null;

  constructor(
    private readonly authDisabled: boolean,
    /** Where new snapshots arrive from the supervisor; null for a policy that only installs its own (the start-up warm-up). */
    endpoint: WorkerEndpoint | null,
    forwardDigestHex: string | undefined = process.env[FORWARD_DIGEST_ENV],
  ) {
    this.forwardDigest = forwardDigestHex !== undefined && /^[0-9a-f]{64}$/.test(forwardDigestHex) ? Buffer.from(forwardDigestHex, 'hex') : null;
    endpoint?.handle('credentials.update.proxy', (snapshot) => {
      this.install(snapshot);
      return { version: this.verifier?.version ?? 0 };
    });
  }

  install(snapshot: ProxyCredentialSnapshot): void {
    if (this.verifier && !isNewerSnapshot({ version: this.verifier.version }, snapshot)) return;
    this.verifier = TokenVerifier.fromSnapshot(snapshot);
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
      isForwarded: (password) => {
        if (this.forwardDigest === null || password === null) return false;
        return timingSafeEqual(createHash('sha256').update(password).digest(), this.forwardDigest);
      },
    };
  }
}
