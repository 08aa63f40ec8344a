/**
 * Private Tor network on loopback for end-to-end tests and `exitpool demo`. See README.md.
 */
export { startTestnet, DEFAULT_BASE_PORT, DEFAULT_USABLE_TIMEOUT_MS, TESTNET_ROOT_DIR } from './testnet.js';
export type { Testnet, TestnetExit, TestnetNode, TestnetOptions } from './testnet.js';
export { WhoamiServer, WHOAMI_HOSTNAME, WHOAMI_JSON_PATH, WHOAMI_ECHO_PATH, WHOAMI_BEHAVIOURS, CAPTCHA_MARKER, RATE_LIMIT_RETRY_AFTER_SECONDS } from './whoami-server.js';
export type { EchoBehaviour, WhoamiBehaviour, WhoamiJson } from './whoami-server.js';
export { DnsResponder, testnetAddressFor, TESTNET_DOMAIN } from './dns-responder.js';
export { TorProcess, DEFAULT_STOP_GRACE_MS } from './tor-process.js';
export type { TorExit, TorProcessOptions } from './tor-process.js';
export { reapStaleRuns, liveTorsOfRun, isTorOfRun } from './stale-runs.js';
export { isShimMapped } from './shim-check.js';
export { handOverSignals } from './emergency-teardown.js';
export { ensureShimBuilt } from './shim-build.js';
export { findRepoRoot } from './repo-root.js';
export { EXIT_DNS_TIMEOUT_MS } from './torrc.js';
export { fetchDirectoryDocument } from './directory-fetch.js';
export { PRIVATE_NETWORK_TOR_WARNINGS } from './expected-tor-warnings.js';
export { DEFAULT_EXIT_COUNTRIES, EGRESS_ELSEWHERE_EXITS, MIN_EXITS } from './topology.js';
export * from './errors.js';
