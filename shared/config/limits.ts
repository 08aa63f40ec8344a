/**
 * Limits every part of the project shares, the dashboard included: this module imports nothing,
 * not even from Node, so the browser bundle can use it as it is instead of restating it.
 */

/** Upper bound of POOL_SIZE and of a resize; it sizes the instance and session port blocks. */
export const MAX_POOL_SIZE = 64;
/**
 * Upper bound of WARM_SPARES. Spares take instance indexes too, so POOL_SIZE (or a resize) plus
 * WARM_SPARES stays within MAX_POOL_SIZE.
 */
export const MAX_WARM_SPARES = 8;
/** Each instance takes PORTS_PER_INSTANCE ports from INSTANCE_PORT_BASE: its (fallback) SOCKS port and control port. */
export const PORTS_PER_INSTANCE = 2;

/**
 * A connection whose username asks for a country no instance's exit is in waits at most this
 * long while an instance is given an exit there (the proxy worker's route deadline follows it).
 */
export const COUNTRY_EXIT_WAIT_MS = 15_000;
