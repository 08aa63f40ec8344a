import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * Hop credentials (supervisor/fleet/README.md, "Hop credentials"): what one node of a fleet
 * presents on another's hop listener (HOP_PORT) to forward one session's connection there.
 *
 * The owner node keeps its own hop keys (random, rotated, never on disk) and publishes them to
 * the fleet's nodes through Redis. A forwarding node's supervisor derives from the owner's key a
 * key for one session, one owner, one forwarder and one window (`sessionHopKey`) and gives only
 * that to its proxy worker, which signs the client's credential id with it (`hopPassword`). The
 * owner's proxy worker derives the same key from its own and checks the signature
 * (`verifyHopPassword`). So a credential seen on the wire opens nothing but that session, on that
 * owner, for about `HOP_WINDOW_MS` (and a window either side, for clocks), and carries the
 * client's credential, which the owner charges and refuses once it is revoked.
 *
 * The SOCKS5 password: `th1~<from node>~<window>~<key id>~<credential>~<signature>`.
 */

export const HOP_CREDENTIAL_TAG = 'th1';
const SEPARATOR = '~';
/** How long one window of a hop credential lasts. */
export const HOP_WINDOW_MS = 60_000;
/** Windows either side of the owner's own in which a credential is still taken (two nodes' clocks differ a little). */
export const HOP_WINDOW_TOLERANCE = 1;

/** A node name (NODE_NAME's syntax). */
const NODE = /^[A-Za-z0-9_.-]{1,64}$/;
/** A hop key's id: 12 characters of base64url. */
const KEY_ID = /^[A-Za-z0-9_-]{12}$/;
/** The credentials a proxy connection can carry: a token by id, or (AUTH_DISABLED) a client address. */
const CREDENTIAL = /^(?:token:[A-Za-z0-9]{1,32}|address:[0-9A-Fa-f.:]{2,45})$/;
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;

/** One of an owner's hop keys: the id names it in a credential, the secret never leaves the fleet's supervisors and the owner's workers. */
export interface HopKey {
  id: string;
  /** 32 random bytes, base64url. */
  secret: string;
}

/** What a forwarding node's proxy worker gets with a route to another node: the means to sign one session's hop there. */
export interface HopGrant {
  from: string;
  window: number;
  keyId: string;
  /** `sessionHopKey`, base64url. */
  key: string;
}

export function isHopKeyId(id: string): boolean {
  return KEY_ID.test(id);
}

export function hopWindow(now: number): number {
  return Math.floor(now / HOP_WINDOW_MS);
}

/** A hop key's secret: its base64url text, or the KeyObject made from it once (hopKeyObject). */
export type HopKeyMaterial = string | KeyObject;

/**
 * The secret as a KeyObject, to make once per key: node:crypto turns a key given as bytes into a
 * KeyObject at every createHmac, which costs several times the HMAC itself (measured: about 15 µs
 * against 2 µs per call on Node 24).
 */
export function hopKeyObject(secret: HopKeyMaterial): KeyObject {
  return typeof secret === 'string' ? createSecretKey(Buffer.from(secret, 'base64url')) : secret;
}

/** The key for one forwarder's hops of one session to one owner in one window, derived from the owner's key. */
export function sessionHopKey(ownerKey: HopKeyMaterial, scope: { from: string; to: string; sessionKey: string; window: number }): Buffer {
  // NUL cannot appear in a node name or a window; the session key (which could) comes last.
  return createHmac('sha256', hopKeyObject(ownerKey))
    .update(`exitpool hop v1\0${scope.from}\0${scope.to}\0${scope.window}\0${scope.sessionKey}`)
    .digest();
}

function signature(key: Buffer, credential: string): string {
  return createHmac('sha256', createSecretKey(key)).update(credential).digest('base64url');
}

/** The password a forwarding node's worker presents for `credential` (the client's: `token:<id>`, or `address:<ip>`). */
export function hopPassword(grant: HopGrant, credential: string): string {
  const mac = signature(Buffer.from(grant.key, 'base64url'), credential);
  return [HOP_CREDENTIAL_TAG, grant.from, String(grant.window), grant.keyId, credential, mac].join(SEPARATOR);
}

export type HopVerdict =
  | { ok: true; from: string; credential: string }
  | { ok: false; reason: 'malformed' | 'window' | 'unknown_key' | 'signature' };

/**
 * The owner's check of a hop password for a connection naming `sessionKey`: made for this node
 * (`node`), this session, a window within HOP_WINDOW_TOLERANCE of now, with one of `keys`.
 */
export function verifyHopPassword(password: string, check: { node: string; sessionKey: string; keys: ReadonlyMap<string, HopKeyMaterial>; now: number }): HopVerdict {
  const parts = password.split(SEPARATOR);
  if (parts.length !== 6) return { ok: false, reason: 'malformed' };
  const [tag, from, windowText, keyId, credential, mac] = parts as [string, string, string, string, string, string];
  if (tag !== HOP_CREDENTIAL_TAG || !NODE.test(from) || !/^[0-9]{1,12}$/.test(windowText) || !KEY_ID.test(keyId) || !CREDENTIAL.test(credential) || !SIGNATURE.test(mac)) {
    return { ok: false, reason: 'malformed' };
  }
  const window = Number(windowText);
  // One spelling per credential: no leading zeros.
  if (String(window) !== windowText) return { ok: false, reason: 'malformed' };
  if (Math.abs(window - hopWindow(check.now)) > HOP_WINDOW_TOLERANCE) return { ok: false, reason: 'window' };
  const secret = check.keys.get(keyId);
  if (secret === undefined) return { ok: false, reason: 'unknown_key' };
  // Compared as text: base64url's last character carries unused bits, so two spellings decode alike.
  const expected = Buffer.from(signature(sessionHopKey(secret, { from, to: check.node, sessionKey: check.sessionKey, window }), credential));
  if (!timingSafeEqual(expected, Buffer.from(mac))) return { ok: false, reason: 'signature' };
  return { ok: true, from, credential };
}
