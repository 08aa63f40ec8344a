import type { ApiAuthenticator } from './auth/api-authenticator.js';
import type { ApiCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import type { SseHub } from './sse-hub.js';

/**
 * The API worker's `credentials.update.api` handler: swap in a newer snapshot, end the live streams
 * of tokens it no longer holds, then acknowledge. The supervisor answers a revocation only after
 * every worker acknowledged, so by then no request and no stream runs on the revoked token.
 */
export function credentialUpdateHandler(auth: ApiAuthenticator, hub: SseHub): (snapshot: ApiCredentialSnapshot) => { version: number } {
  return (api) => {
    if (auth.update(api)) {
      const valid = new Set(api.tokens.map((t) => t.id));
      hub.endRevoked((id) => valid.has(id));
    }
    return { version: auth.version };
  };
}
