/**
 * Limits every part of the project shares, the dashboard included: this module imports nothing,
 * not even from Node, so the browser bundle can use it as it is instead of restating it.
 */

/** Upper bound of POOL_SIZE and of a resize; it sizes the instance and session port blocks. */
export const MAX_POOL_SIZE = 64;
/** Each instance takes PORTS_PER_INSTANCE ports from INSTANCE_PORT_BASE: its (fallback) SOCKS port and control port. */
export const PORTS_PER_INSTANCE = 2;
