import type { Config } from './config.js';
import { DEFAULT_SESSION_MODES, MAX_POOL_SIZE, MAX_WARM_SPARES, resolveDataDir } from './config.js';
import { defaultProxyWorkers } from './proxy-workers.js';
import { LOG_LEVELS } from '../logger.js';
import { ADMIN_PASSWORD_MIN_LENGTH, PLACEHOLDER_RULE, PROXY_TOKEN_MIN_LENGTH, REDIS_PASSWORD_MIN_LENGTH, SIGNING_SECRET_MIN_LENGTH } from './secret-values.js';
import {
  adminPassword,
  durationIn,
  exitListSource,
  fetchUrlList,
  hostList,
  signingSecret,
  integerIn,
  nodeList,
  nodeAddress,
  nodeName,
  fleetEpoch,
  nonEmptyText,
  oneOf,
  parseBoolean,
  port,
  rateLimit,
  routableFloor,
  stateStore,
  tokenSecret,
  torrcLines,
} from './values.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * One environment variable. The table below is the single source of truth: the loader, the
 * tests and docs/configuration.md all read it, so the three cannot drift apart.
 */
export interface VariableDefinition<K extends keyof Config = keyof Config> {
  name: string;
  /** Other accepted spellings (NET_ spellings, kept as aliases of the TOR_ names tor itself uses). */
  aliases?: readonly string[];
  key: K;
  /** The default as a user would write it; null when unset means "none" (the value is null). */
  defaultText: string | null;
  /** How the default is shown in the docs when it is computed rather than a literal. */
  defaultDoc?: string;
  secret?: boolean;
  description: string;
  parse(raw: string): NonNullable<Config[K]>;
  /** Computed default when defaultText is null but the value must not be null. */
  computeDefault?(): Config[K];
}

function def<K extends keyof Config>(d: VariableDefinition<K>): VariableDefinition<K> {
  return d;
}

export const VARIABLES: readonly VariableDefinition[] = [
  def({ name: 'POOL_SIZE', key: 'poolSize', defaultText: '5', parse: integerIn(1, MAX_POOL_SIZE),
    description: `Number of tor instances in the pool (1 to MAX_POOL_SIZE). Each uses about 30 to 40 MB.` }),
  def({ name: 'MIN_READY', key: 'minReady', defaultText: '1', parse: integerIn(1, MAX_POOL_SIZE),
    description: 'The proxies serve once this many instances have bootstrapped. At most POOL_SIZE.' }),
  def({ name: 'DEFAULT_SESSION', key: 'defaultSession', defaultText: 'ip', parse: oneOf(DEFAULT_SESSION_MODES),
    description: 'Pinning of an authenticated caller that names no session: ip (per client IP), random (per connection), shared (one session for all).' }),
  def({ name: 'SESSION_TTL', key: 'sessionTtlMs', defaultText: '10m', parse: durationIn(SECOND, 30 * DAY),
    description: 'A session idle this long (no request, no live connection) is unpinned and forgotten.' }),
  def({ name: 'MAX_SESSIONS', key: 'maxSessions', defaultText: '100000', parse: integerIn(1, 10_000_000),
    description: 'Upper bound of the session table. When full, the least recently seen idle session makes room; a session with a live connection is never evicted, and if all have one a new key is refused.' }),
  def({ name: 'QUARANTINE_FAILURES', key: 'quarantineFailures', defaultText: '5', parse: integerIn(1, 1000),
    description: 'Quarantine score, in whole unclassified failures within FAILURE_WINDOW; a captcha spends several, a rate limit less than one.' }),
  def({ name: 'QUARANTINE_CONSECUTIVE', key: 'quarantineConsecutive', defaultText: '3', parse: integerIn(1, 1000),
    description: 'Exit-blaming failures in a row (no success between, any kind except rate_limited) that quarantine an instance.' }),
  def({ name: 'MIN_ROUTABLE', key: 'minRoutable', defaultText: '25%', parse: routableFloor,
    description: "Floor of routable instances (a number, or a share of POOL_SIZE as N%; at least 1). Client failure reports and failures that depend on the client's destination (refused, unreachable, timed out) never quarantine an instance when that would leave fewer routable; they are still counted. The proxy's own evidence that a tor is unreachable, and manual quarantine, still quarantine." }),
  def({ name: 'CLIENT_REPORT_BUDGET', key: 'clientReportBudget', defaultText: '30/1m', parse: rateLimit(MINUTE),
    description: 'Failure reports one credential (a token, a sign-in, or a client address under AUTH_DISABLED) may have scored per window, as N/DURATION. Reports beyond it are answered, counted and audited (scored: false) but weigh nothing, so one client cannot quarantine the pool by itself.' }),
  def({ name: 'BAN_REPORTERS', key: 'banReporters', defaultText: '2', parse: integerIn(1, 20),
    description: "Independent reporters (credentials of different parties: tokens of different `owner`s; one sign-in is the operator; client addresses under AUTH_DISABLED count by /24, /48 for IPv6) whose captcha or blocked reports against one exit within BAN_REPORT_WINDOW ban it for everyone. One party's reports never do: they move its own sessions, may ban the exit for the site they name, and leave the exit suspect (chosen last)." }),
  def({ name: 'BAN_REPORT_WINDOW', key: 'banReportWindowMs', defaultText: '1h', parse: durationIn(MINUTE, 7 * DAY),
    description: 'How long a captcha or blocked report about an exit counts towards a ban for everyone (BAN_REPORTERS), and how long an exit quarantined on one party\'s reports stays suspect.' }),
  def({ name: 'CLIENT_BAN_BUDGET', key: 'clientBanBudget', defaultText: '5/1h', parse: rateLimit(MINUTE),
    description: "Bans (for one site, or a share in one for everyone) one credential's reports may bring about per window, as N/DURATION. Beyond it its reports still move its own sessions and are scored, but ban nothing." }),
  def({ name: 'MIN_ELIGIBLE_EXITS', key: 'minEligibleExits', defaultText: '25%', parse: routableFloor,
    description: "Floor of eligible exits (not banned, not down, not held by another node) in the whole catalog: a number, or a share of the catalog's usable exits as N%. Client evidence never bans an exit when that would leave fewer (the ban is withheld, audited and counted)." }),
  def({ name: 'MIN_ELIGIBLE_EXITS_PER_COUNTRY', key: 'minEligibleExitsPerCountry', defaultText: '1', parse: integerIn(0, 100),
    description: "Floor of eligible exits per country: client evidence never bans the exit that would leave its country with fewer (so one token cannot close a country to every other client). 0 turns the per-country floor off." }),
  def({ name: 'BAN_RATE_ALERT', key: 'banRateAlert', defaultText: '10', parse: integerIn(1, 100_000),
    description: 'Bans per hour (every kind, this node) above which an `exit` audit event with reason `ban_rate` is recorded (once per hour) and `pool_exit_ban_rate_exceeded` is 1.' }),
  def({ name: 'FAILURE_WINDOW', key: 'failureWindowMs', defaultText: '5m', parse: durationIn(SECOND, DAY),
    description: 'Sliding window over which failures are weighed for quarantine.' }),
  def({ name: 'PIN_EXIT_RELAY', key: 'pinExitRelay', defaultText: 'true', parse: parseBoolean,
    description: "Lock each instance to one exit relay, so one session means exactly one exit IP until rotated. The supervisor chooses each instance's exit from the consensus (distinct by EXIT_DISTINCT, bandwidth-weighted, within TOR_EXIT_NODES, never a banned one) and replaces it when it leaves the consensus or no circuit through it can be built, so a pinned instance no longer depends on one relay. Off: each tor picks its own exits (instances may share one)." }),
  def({ name: 'EXIT_DISTINCT', key: 'exitDistinct', defaultText: 'subnet', parse: oneOf(['relay', 'subnet', 'family'] as const),
    description: 'What no two instances share while the exit catalog has enough exits: relay (the same exit relay), subnet (also the same /24, or /48 for IPv6) or family (also the same declared relay family). With too few exits the least-shared exit is assigned (a relay no other instance uses first) and the shortage is reported (GET /api/exits, the instance view, the audit).' }),
  def({ name: 'EXIT_HISTORY', key: 'exitHistory', defaultText: '5', parse: integerIn(0, 50),
    description: "How many exits a session remembers: a session rotation moves it to an exit that is none of them (nor in their /24s), assigning a fresh exit to an idle instance when no ready one qualifies." }),
  def({ name: 'WARM_SPARES', key: 'warmSpares', defaultText: '2', parse: integerIn(0, MAX_WARM_SPARES),
    description: `Instances kept beyond POOL_SIZE for session rotations (0 to MAX_WARM_SPARES), each ready on an exit of its own: a rotation that finds no instance on an exit new to the session takes a spare, without moving any other session. Spares take no new sessions, are not counted in POOL_SIZE, and are started only with PIN_EXIT_RELAY. Each is one more tor (about 30 to 40 MB). With POOL_SIZE + WARM_SPARES at least EXIT_HISTORY + 2 (and that many distinct /24s in the catalog), a ready instance on a new exit always exists; see docs/operations.md for sizing.` }),
  def({ name: 'EGRESS_PROBE_URLS', key: 'egressProbeUrls', defaultText: 'https://check.torproject.org/api/ip', parse: fetchUrlList,
    description: "IP-echo URLs (comma-separated http: or https:, tried in order) through which each exit's egress address is measured when an instance is pinned to it, and again after EGRESS_PROBE_TTL: `exit_ip`, /24 distinctness, bans and countries are then those of the address sites see, not the one the relay publishes. The answer is an address, or JSON with `IP`, `ip`, `address` or `origin`. The default is the Tor Project's own service, over https (docs/security.md says what a probe reveals). `none`: no probe (exits are judged by their published address, or EXIT_LIST's)." }),
  def({ name: 'EGRESS_PROBE_TTL', key: 'egressProbeTtlMs', defaultText: '1h', parse: durationIn(MINUTE, 7 * DAY),
    description: 'How long an exit\'s measured egress address is taken as current: an exit pinned again within it is not probed again; one that stays pinned is probed again once it is over.' }),
  def({ name: 'EGRESS_PROBE_TIMEOUT', key: 'egressProbeTimeoutMs', defaultText: '10s', parse: durationIn(SECOND, 2 * MINUTE),
    description: "One probe's whole time, every URL included. A bootstrapping instance serves once its egress address is known or this has passed (it then serves with the published address), so it bounds how much a probe delays an instance's first request." }),
  def({ name: 'EXIT_LIST', key: 'exitList', defaultText: '', parse: exitListSource,
    description: "A Tor exit list in the bulk `exit-addresses` format (the Tor Project publishes one at https://check.torproject.org/exit-addresses): an http(s) URL, fetched through one of the pool's exits, or an absolute file path; read at start and every hour. Its addresses count until a newer probe says otherwise, so exits are told apart before they were ever pinned. Empty: none." }),
  def({ name: 'EXIT_HEADER', key: 'exitHeader', defaultText: 'false', parse: parseBoolean,
    description: "The HTTP proxy adds `Exitpool-Exit: <exit IP>` to every response it relays and to its CONNECT reply: the exit the pool knew for the session's instance when it routed the request (empty exits are not named). Off by default: a response then reaches the client exactly as the destination sent it, but for hop-by-hop fields." }),
  def({ name: 'USERNAME_PARAMS', key: 'usernameParams', defaultText: 'true', parse: parseBoolean,
    description: 'Read per-session choices from the end of the proxy username: `<key>-country-de,nl-sesstime-30-mode-rotating` (docs/api.md, "Session parameters in the username"). A username without them is the key as before. Off: every username is a raw key.' }),
  def({ name: 'SESSION_TTL_MAX', key: 'sessionTtlMaxMs', defaultText: '24h', parse: durationIn(MINUTE, 30 * DAY),
    description: 'The longest idle lifetime a username may ask for with sesstime- or ttl-; a longer one is refused.' }),
  def({ name: 'EXIT_BAN_TTL', key: 'exitBanTtlMs', defaultText: '3h', parse: durationIn(MINUTE, 30 * DAY),
    description: 'How long an exit stays banned after a quarantine for captcha or blocked reports, or a run of transport failures: no instance is assigned it meanwhile (DELETE /api/exits/{fingerprint}/ban lifts it).' }),
  def({ name: 'TOR_MAX_CIRCUIT_DIRTINESS', aliases: ['NET_MAX_CIRCUIT_DIRTINESS'], key: 'torMaxCircuitDirtinessMs', defaultText: '1h', parse: durationIn(10 * SECOND, 30 * DAY),
    description: "Tor's MaxCircuitDirtiness: how long a circuit that carried traffic is reused." }),
  def({ name: 'TOR_CONFLUX', aliases: ['NET_CONFLUX'], key: 'torConflux', defaultText: 'false', parse: parseBoolean,
    description: "Tor's ConfluxEnabled. Off keeps one exit per instance (conflux can switch exits mid-session)." }),
  def({ name: 'TOR_EXIT_NODES', aliases: ['NET_EXIT_NODES'], key: 'torExitNodes', defaultText: '', parse: nodeList,
    description: 'Restrict exits: comma-separated country codes ({de},{nl}, or bare: de,nl), relay fingerprints or nicknames. A bare two-letter entry is always a country code; name a relay with a two-letter nickname by its fingerprint.' }),
  def({ name: 'TOR_STRICT_NODES', aliases: ['NET_STRICT_NODES'], key: 'torStrictNodes', defaultText: 'false', parse: parseBoolean,
    description: "Tor's StrictNodes: never fall back to exits outside TOR_EXIT_NODES." }),
  def({ name: 'TOR_BINARY', key: 'torBinary', defaultText: 'tor', parse: nonEmptyText(4096),
    description: 'The tor executable (name on PATH or absolute path).' }),
  def({ name: 'TOR_EXTRA_CONFIG', key: 'torExtraConfig', defaultText: '', parse: torrcLines,
    description: 'torrc lines appended to every instance (newline or a literal \\n separates them): how a private network or bridges plug in.' }),
  def({ name: 'AUTH_DISABLED', key: 'authDisabled', defaultText: 'false', parse: parseBoolean,
    description: 'Turn off every credential check on the proxies and the API. Logged as a warning at startup.' }),
  def({ name: 'DRAIN_ON_ROTATE', key: 'drainOnRotate', defaultText: 'true', parse: parseBoolean,
    description: 'An instance rotate first moves the sessions off the instance and answers once they have moved.' }),
  def({ name: 'ADMIN_USER', key: 'adminUser', defaultText: 'admin', parse: nonEmptyText(128),
    description: 'User name for the dashboard sign-in. Changing it invalidates every outstanding sign-in.' }),
  def({ name: 'ADMIN_PASSWORD', key: 'adminPassword', defaultText: null, defaultDoc: 'generated on first boot', secret: true, parse: adminPassword,
    description: `Dashboard password, at least ${ADMIN_PASSWORD_MIN_LENGTH} characters. Wins over the generated one at once, is never written to disk, and clears the stored digest. ${PLACEHOLDER_RULE}` }),
  def({ name: 'PROXY_TOKEN', key: 'proxyToken', defaultText: null, defaultDoc: 'none (a token is generated on first boot)', secret: true, parse: tokenSecret,
    description: `An extra proxy-scoped token from configuration: tp_ followed by ${PROXY_TOKEN_MIN_LENGTH} to 128 letters, digits, - or _ (an issued token has ${PROXY_TOKEN_MIN_LENGTH}). Verified like any token, never persisted, cannot be revoked through the API. ${PLACEHOLDER_RULE}` }),
  def({ name: 'SIGNING_SECRET', key: 'signingSecret', defaultText: null, defaultDoc: 'none (a random secret is kept in DATA_DIR/signing.key)', secret: true, parse: signingSecret,
    description: `Secret from which sign-in credentials are signed, at least ${SIGNING_SECRET_MIN_LENGTH} characters (for example: openssl rand -base64 32). When set, nothing in DATA_DIR suffices to forge a sign-in, so a copy of DATA_DIR (a backup, a volume snapshot) grants no admin access; changing it signs everyone out. ${PLACEHOLDER_RULE}` }),
  def({ name: 'LOGIN_TTL', key: 'loginTtlMs', defaultText: '12h', parse: durationIn(MINUTE, 30 * DAY),
    description: 'Lifetime of a sign-in credential from POST /api/auth/login.' }),
  def({ name: 'LOGIN_RATE_LIMIT', key: 'loginRateLimit', defaultText: '10/5m', parse: rateLimit(5 * MINUTE),
    description: 'Failed sign-ins allowed per client address per window (N/DURATION); further attempts get 429 with Retry-After.' }),
  def({ name: 'SESSION_PORT_BASE', key: 'sessionPortBase', defaultText: null, defaultDoc: 'unset (no session ports)', parse: integerIn(1, 65535 - MAX_POOL_SIZE),
    description: 'Open one credential-free SOCKS listener per instance N at this base + N. Requires AUTH_DISABLED.' }),
  def({ name: 'SOCKS_PORT', key: 'socksPort', defaultText: '9250', parse: port, description: 'SOCKS5 listener port.' }),
  def({ name: 'HTTP_PORT', key: 'httpPort', defaultText: '9251', parse: port, description: 'HTTP proxy listener port.' }),
  def({ name: 'API_PORT', key: 'apiPort', defaultText: '8080', parse: port, description: 'Management API and dashboard port.' }),
  def({ name: 'BIND_HOST', key: 'bindHost', defaultText: '127.0.0.1', parse: nonEmptyText(255),
    description: 'Address the proxy and API listeners bind. There is no TLS: publish on loopback unless a TLS terminator sits in front.' }),
  def({ name: 'API_ALLOWED_HOSTS', key: 'apiAllowedHosts', defaultText: '', parse: hostList,
    description: 'Host names (comma-separated) the API and dashboard answer to besides IP addresses, localhost and BIND_HOST; any other Host header gets 403, so a web page cannot reach the API by re-pointing its own name at this machine (DNS rebinding). Add the name you browse to, e.g. exitpool.internal. * accepts every Host (only behind a proxy that checks it).' }),
  def({ name: 'INSTANCE_PORT_BASE', key: 'instancePortBase', defaultText: '19050', parse: integerIn(1024, 65535 - MAX_POOL_SIZE * 2),
    description: "Start of a loopback port block kept for the instances' fallback listeners. Each tor's SocksPort and control port are Unix sockets in its private data directory (DATA_DIR/tor/N, mode 0700), which no other user can reach; only when DATA_DIR is so deep that a socket path would pass 107 bytes does instance N listen on TCP base+2N (SOCKS) and base+2N+1 (control), where any local user could connect (a warning says so)." }),
  def({ name: 'DATA_DIR', key: 'dataDir', defaultText: './data', parse: (raw) => resolveDataDir(nonEmptyText(4096)(raw)),
    description: "State directory: auth.json, signing.key, state.db (STATE_STORE=sqlite) and one tor DataDirectory per instance. Make it persistent to keep credentials. At start it is created, or made, 0700, and the files the service keeps in it 0600, whatever the umask; a directory the service cannot make private (another user's, such as a volume's root) refuses the start, unless it is shared with the service's group on purpose: setgid, writable by that group, nothing for others (Kubernetes fsGroup). A subdirectory of such a volume works everywhere: the service creates it (docs/operations.md, \"The data directory\")." }),
  def({ name: 'STATE_STORE', key: 'stateStore', defaultText: 'sqlite', secret: true, parse: stateStore,
    description: `The durable state: sessions (key, instance, exit, counters), each instance's exit and the exit bans, each instance's health and remediation ladder, the audit trail and the stats history. sqlite keeps them in DATA_DIR/state.db, written about once a second behind the request path, so a restart (or a crash of the service: at worst the last second is lost; docs/operations.md says what a power loss can take) keeps every session on its exit IP. A redis:// (or rediss://) URL keeps them in Redis instead, under the key prefix exitpool: (the URL's path names another: redis://host:6379/pool-a); a start refuses while that Redis cannot be reached. none starts every time from a clean slate. A state written by an earlier release is migrated to this release's format. Only a state proven corrupt is moved aside (DATA_DIR/state.db.unusable-<time>, or Redis keys renamed exitpool:unusable-<time>:…), with an error in the log, and the service starts empty; one that cannot be read (permissions, an I/O error), another program's, or one a newer release wrote stops the start with one line (exit 78) and is left as it is (docs/operations.md, "Upgrading"). Credentials (auth.json) are never part of it. A password in the URL (redis://:password@host) must have at least ${REDIS_PASSWORD_MIN_LENGTH} characters; a password containing CHANGE-ME is refused.` }),
  def({ name: 'NODE_NAME', key: 'nodeName', defaultText: '', defaultDoc: 'the host name', parse: (raw) => nodeName(raw),
    description: "This node's name among the nodes that share one STATE_STORE=redis://… (docs/operations.md, \"Several nodes\"): it names the node's own state keys and its leases, and two running nodes cannot share it (the second refuses to start). Letters, digits, _, . and -, at most 64. Only read with a redis:// STATE_STORE." }),
  def({ name: 'NODE_LEASE', key: 'nodeLeaseMs', defaultText: '10s', parse: durationIn(2 * SECOND, 5 * MINUTE),
    description: "With a redis:// STATE_STORE: how long a node's lease and the leases on its exits outlive its last renewal (renewed three times per lease). A node that dies frees its exits for the other nodes after this long; a node name still held is waited for this long at start before the start is refused." }),
  def({ name: 'NODE_ADDRESS', key: 'nodeAddress', defaultText: '', defaultDoc: 'BIND_HOST, or the host name when BIND_HOST is 0.0.0.0 or ::', parse: nodeAddress,
    description: "With a redis:// STATE_STORE: the host name or address at which the other nodes reach this node's HOP_PORT, to forward the connections of sessions this node owns (docs/operations.md, \"Several nodes\"). In Kubernetes, the pod's stable name through its headless Service." }),
  def({ name: 'HOP_PORT', key: 'hopPort', defaultText: '9252', parse: port,
    description: "With a redis:// STATE_STORE: the internal listener where other nodes of the fleet forward the connections of sessions this node owns (SOCKS5, on BIND_HOST). It takes only hop credentials, which one node signs per session and minute with this node's keys (supervisor/fleet/README.md, \"Hop credentials\"), never a proxy token; the clients' SOCKS_PORT and HTTP_PORT never take a hop credential. Reachable by the other nodes only: do not publish it (the Kubernetes manifests restrict it to the fleet's pods with a NetworkPolicy)." }),
  def({ name: 'FLEET_RESEED', key: 'fleetReseed', defaultText: '', parse: fleetEpoch,
    description: "With a redis:// STATE_STORE, after Redis lost the fleet's data: the lost epoch, as the error line of every node names it. A node started with it re-seeds the fleet from what it knows (its tokens but those revoked anywhere, its bans, its hop keys) under a new epoch that continues the lost one; every other node that knew the lost epoch then joins it at its next renewal and brings what it knows too (docs/operations.md, \"When Redis lost its data\"). A value that names no epoch this node lost does nothing (a warning says so): remove it once the fleet is re-seeded." }),
  def({ name: 'LOG_LEVEL', key: 'logLevel', defaultText: 'info', parse: oneOf(LOG_LEVELS),
    description: "error, warn, info or debug. debug also shows tor's own notice lines, tagged with the instance." }),
  def({ name: 'LOG_FORMAT', key: 'logFormat', defaultText: 'text', parse: oneOf(['text', 'json'] as const),
    description: 'text (one readable line with fields) or json (one JSON object per line).' }),
  def({ name: 'BOOTSTRAP_STALL_TIMEOUT', key: 'bootstrapStallTimeoutMs', defaultText: '2m', parse: durationIn(SECOND, HOUR),
    description: 'A bootstrap with no progress for this long is restarted: first keeping state, the next time wiping it.' }),
  def({ name: 'SPAWN_STAGGER', key: 'spawnStaggerMs', defaultText: '250ms', parse: durationIn(0, MINUTE),
    description: 'Delay between starting two instances (at start and when growing the pool).' }),
  def({ name: 'PROXY_WORKERS', key: 'proxyWorkers', defaultText: null, defaultDoc: 'one per 2 CPU cores, at least 1', parse: integerIn(1, 256),
    computeDefault: defaultProxyWorkers, description: 'Proxy worker processes sharing the SOCKS5 and HTTP listeners. The default gives the proxy layer about half of the cores and leaves the rest to the tors, which cost about as much CPU per request (docs/operations.md, "Sizing"; the measurements in docs/performance.md). Each worker holds at most MAX_CONNECTIONS_PER_WORKER connections: for more concurrent connections than the default workers hold, raise it or this.' }),
  def({ name: 'PROXY_WARM_UP', key: 'proxyWarmUp', defaultText: '500', parse: integerIn(0, 100_000),
    description: "Connections each proxy worker sends through its own SOCKS5 path at start, before it listens, to a stand-in instance inside the worker, so that the first clients find more of its code compiled. It runs while the tors bootstrap, within WARM_UP_MAX_MS (workers/proxy-worker/warm-up.ts) at most, and costs only that CPU. Measured (docs/performance.md, \"A fresh service's first burst\"): it trims the workers' CPU over a fresh service's first burst a little, but does not remove what that burst adds, which has other causes. 0 turns it off." }),
  def({ name: 'MAX_CONNECTIONS_PER_WORKER', key: 'maxConnectionsPerWorker', defaultText: '8192', parse: integerIn(1, 1_000_000),
    description: 'Client connections one proxy worker holds at once over all its listeners (each costs it two file descriptors). Beyond it a connection is refused at once: HTTP gets 503, SOCKS5 is closed; refusals are logged and counted in pool_proxy_connections_refused_total.' }),
  def({ name: 'MAX_UNAUTHENTICATED_PER_WORKER', key: 'maxUnauthenticatedPerWorker', defaultText: '1024', parse: integerIn(1, 1_000_000),
    description: 'Of those, connections one proxy worker holds that have not yet proved a credential (SOCKS5 before its credentials are accepted, HTTP before its first authenticated request); a value above MAX_CONNECTIONS_PER_WORKER counts as that. When a new connection needs room (over either bound), the oldest unauthenticated connection is closed to make it: idle sockets cannot lock real clients out. Counted in pool_proxy_connections_evicted_total.' }),
  def({ name: 'SHUTDOWN_GRACE', key: 'shutdownGraceMs', defaultText: '20s', parse: durationIn(0, 10 * MINUTE),
    description: 'On SIGTERM or SIGINT the proxies stop accepting and open tunnels and requests get this long to finish; what is left is then closed (not counted against any instance) and tor is stopped. pm2 kill_timeout, the systemd TimeoutStopSec and Docker stop_grace_period must exceed it by the time tor takes to stop (see docs/operations.md).' }),
  def({ name: 'REMEDIATION_BACKOFF_BASE', key: 'remediationBackoffBaseMs', defaultText: '30s', parse: durationIn(SECOND, HOUR),
    description: 'First delay of the restart-with-backoff rung of the remediation ladder; it doubles per attempt at that rung.' }),
  def({ name: 'REMEDIATION_BACKOFF_MAX', key: 'remediationBackoffMaxMs', defaultText: '10m', parse: durationIn(SECOND, DAY),
    description: 'Ceiling of the restart-with-backoff delay.' }),
  def({ name: 'REMEDIATION_RECURRENCE_WINDOW', key: 'remediationRecurrenceWindowMs', defaultText: '30m', parse: durationIn(SECOND, 7 * DAY),
    description: 'A quarantine within this long of the previous remediation climbs one rung; after a longer quiet period the ladder starts again at the cheapest rung.' }),
  def({ name: 'ROTATION_GRACE', key: 'rotationGraceMs', defaultText: '5s', parse: durationIn(0, 10 * MINUTE),
    description: "Failures within an instance's rotation window plus this grace are not scored against it." }),
];
