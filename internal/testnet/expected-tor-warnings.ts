/**
 * Warnings every tor of a private network prints at start, by design of such a network: it names
 * its own directory authorities, sets TestingTorNetwork, and (in a container or CI) runs as root.
 * A client of the network (exitpool's instances in the demo) logs them at debug: on every
 * instance start they would otherwise read as problems to a newcomer.
 */
export const PRIVATE_NETWORK_TOR_WARNINGS: readonly RegExp[] = [
  /\[warn\] You have used DirAuthority or AlternateDirAuthority to specify alternate directory authorities/,
  /\[warn\] TestingTorNetwork is set\./,
  /\[warn\] You are running Tor as root\./,
];
