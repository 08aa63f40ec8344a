/**
 * Command-line flags of testnet-orphan-child.ts, in a module of their own: importing the child
 * itself would start a network.
 */

/** Install an unrelated SIGTERM listener before the network starts (as playwright does to close its browsers). */
export const FOREIGN_SIGTERM_LISTENER_ARG = '--foreign-sigterm-listener';
