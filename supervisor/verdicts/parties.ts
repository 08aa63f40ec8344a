import { addressBlock } from '../exits/exit-relay.js';

/**
 * The party behind a credential: reports of two credentials of one party are one party's word.
 *
 * - A token is its owner's (`owner`, set when the operator issues it to someone); a token without
 *   an owner, PROXY_TOKEN, the first-boot token and a sign-in are all the operator's: one person
 *   mints them, so they are never independent of each other.
 * - Under AUTH_DISABLED a credential is a client address; addresses count by their /24 (IPv4) or
 *   /48 (IPv6), so one host with a block of addresses is one party.
 * - Session ports are the pool's own plumbing, not a client that reports. (A connection another
 *   node of a fleet forwarded carries its client's own credential.)
 */
export type PartyOf = (credential: string) => string;

/** The owner of a token by id: '' for the operator's own, null when the token is unknown. */
export type TokenOwner = (id: string) => string | null;

export const OPERATOR_PARTY = 'operator';

export function partyResolver(tokenOwner: TokenOwner): PartyOf {
  return (credential) => {
    const colon = credential.indexOf(':');
    const kind = colon < 0 ? credential : credential.slice(0, colon);
    const value = colon < 0 ? '' : credential.slice(colon + 1);
    switch (kind) {
      case 'token': {
        const owner = tokenOwner(value);
        return owner === null || owner === '' ? OPERATOR_PARTY : `owner:${owner}`;
      }
      case 'sign-in':
        return OPERATOR_PARTY;
      case 'address':
        return `net:${addressBlock(value)}`;
      default:
        return `pool:${credential}`;
    }
  };
}
