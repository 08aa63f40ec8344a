import { TOKEN_PREFIX } from './token-format.js';

/** Longest bearer credential worth looking at; a sign-in credential of ours is far shorter. */
export const MAX_CREDENTIAL_LENGTH = 4096;

export type CredentialKind = 'token' | 'jwt' | 'malformed';

// Three base64url segments; the signature may be empty only in an unsigned JWT, which the
// verifier then refuses, so the shape test stays honest about what a JWT looks like.
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Which verifier a bearer credential goes to. Says nothing about validity. */
export function classifyCredential(text: string): CredentialKind {
  if (text.length === 0 || text.length > MAX_CREDENTIAL_LENGTH) return 'malformed';
  if (text.startsWith(TOKEN_PREFIX)) return 'token';
  if (JWT_SHAPE.test(text)) return 'jwt';
  return 'malformed';
}
