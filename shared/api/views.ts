/** API resource shapes (docs/api.md, "Resources"), shared by supervisor and API worker. */

export interface Totals {
  requests: number;
  failures: number;
  bytes_up: number;
  bytes_down: number;
}

export interface PoolSummary {
  version: string;
  /** The pool's instances (POOL_SIZE, as resized); spares are counted apart. */
  size: number;
  ready: number;
  routable: number;
  sessions: number;
  /** An addition of ours (docs/api.md): the instances kept beyond the pool for session rotations (WARM_SPARES). */
  spares: SparesView;
  totals: Totals;
  socks_port: number;
  http_port: number;
  config: {
    pool_size: number;
    session_ttl: string;
    default_session: string;
    [key: string]: unknown;
  };
}

export const HEALTH_STATES = ['starting', 'healthy', 'degraded', 'probation', 'quarantined', 'remediating'] as const;
export type HealthState = (typeof HEALTH_STATES)[number];

export interface HealthView {
  state: HealthState;
  failures_in_window: number;
  consecutive_failures: number;
  failure_score: number;
  quarantine_score: number;
  transport_failures: number;
  client_failures: number;
  failures_by_kind: Record<string, number>;
  remediations: number;
  remediation_rung: string;
}

export interface InstanceView {
  id: number;
  ready: boolean;
  running: boolean;
  bootstrap: number;
  pid: number;
  uptime_secs: number;
  sessions: number;
  socks_addr: string;
  exit_ip: string;
  exit_country: string;
  exit_nickname: string;
  retired_exit_ip: string;
  exit_confirmed: boolean;
  /**
   * An addition of ours: the OR address the exit relay publishes in the consensus ('' while
   * exit_ip is ''). exit_ip is the address sites see: the measured one when exit_ip_source is
   * `probe` or `exit_list`, this one when it is `published`.
   */
  published_exit_ip: string;
  /** An addition of ours: where exit_ip comes from: `probe`, `exit_list`, `published`; '' while exit_ip is ''. */
  exit_ip_source: ExitAddressSource | '';
  /** An addition of ours: when exit_ip was measured (the probe's time, or the exit list's); null for a published address. */
  exit_ip_measured_at: string | null;
  pinned_exit: string;
  health: HealthView;
  totals: Totals & { latency_ms: number };
  /** An addition of ours (docs/api.md): drained, taking no new sessions until released. */
  draining: boolean;
  /** An addition of ours: a spare (WARM_SPARES), kept for session rotations: it takes no new session, only those that rotate onto it. */
  spare: boolean;
  /** An addition of ours: mid-rotation, out of service until its new exit is known. */
  rotating: boolean;
  /** An addition of ours: false while its tor does not answer its control port (frozen); out of service meanwhile. */
  responsive: boolean;
  /** An addition of ours: the exit the supervisor assigned (PIN_EXIT_RELAY), or null. */
  assigned_exit: ExitAssignmentView | null;
  /** An addition of ours: why the instance has no exit of its own ('' when it has). */
  exit_shortage: string;
}

/** The spares as GET /api/pool counts them (docs/api.md, "Spares"). */
export interface SparesView {
  /** Spare instances (WARM_SPARES; 0 without PIN_EXIT_RELAY). */
  size: number;
  /** Bootstrapped ones. */
  ready: number;
  /** Ready, routable and without sessions: what a rotation can take at once. */
  warm: number;
  /** Carrying sessions that rotated onto them. */
  in_use: number;
}

/** Where an exit's address comes from: measured through it, read from a Tor exit list, or the one it publishes. */
export type ExitAddressSource = 'probe' | 'exit_list' | 'published';

/** How an exit's address was found (docs/api.md, "What sites see"). */
export interface ExitAddressFields {
  /** The OR address the relay publishes in the consensus. */
  published_address: string;
  /** Where `address` comes from. */
  address_source: ExitAddressSource;
  /** When `address` was measured (a probe) or seen (the exit list); null for the published address. */
  address_measured_at: string | null;
  /** Every address its traffic was seen leaving from (probes, the exit list), oldest first; a ban covers each. */
  seen_addresses: string[];
}

/** An instance's assigned exit (docs/api.md, "Exits"). */
export interface ExitAssignmentView extends ExitAddressFields {
  fingerprint: string;
  nickname: string;
  /** The address sites see (measured, listed, or the published one until either says otherwise). */
  address: string;
  /** The country of `address` (tor's GeoIP database). */
  country: string;
  /** The /24 (IPv4) or /48 (IPv6) of its address. */
  block: string;
  /** Smallest fingerprint of its declared family; its own when it has none. */
  family: string;
  /** false when it shares EXIT_DISTINCT's unit with another instance's exit (too few exits). */
  distinct: boolean;
  /** Found dead by the pool's own evidence (down, or back on probation); null when not. */
  down: ExitDownView | null;
}

/** One exit of the catalog (GET /api/exits). */
export interface ExitView extends ExitAddressFields {
  fingerprint: string;
  nickname: string;
  /** The address sites see (as `assigned_exit.address`). */
  address: string;
  country: string;
  bandwidth: number;
  block: string;
  family: string;
  /** Instances assigned this exit. */
  instances: number[];
  banned: ExitBanView | null;
  /** Found dead by the pool's own evidence (down, or back on probation); null when not. */
  down: ExitDownView | null;
  /** Another node of the fleet that holds this exit's lease (it is never assigned here meanwhile); null on a node of its own. */
  held_by: string | null;
}

export interface ExitBanView {
  fingerprint: string;
  /** The address its traffic left from when it was banned. */
  address: string;
  /** Every other address it was seen leaving from: banned too (any relay leaving from one of them is not assigned). */
  seen_addresses: string[];
  nickname: string;
  /** '' when banned for everyone; else the one site it is banned for. */
  domain: string;
  cause: string;
  reason: string;
  since: string;
  until: string;
}

/**
 * An exit found dead by the pool's own evidence (docs/api.md, "Exits that die"): a short state of
 * its own, not a ban.
 */
export interface ExitDownView {
  fingerprint: string;
  nickname: string;
  address: string;
  /** `down`: assigned to no instance until `until`; `probation`: eligible again, and found dead before `probation_until` its next hold doubles. */
  state: 'down' | 'probation';
  since: string;
  until: string;
  probation_until: string;
  /** Deaths in a row, each found before the previous one's probation ended. */
  strikes: number;
  /** The instance whose tor found it dead (null when unknown). */
  instance: number | null;
  /** What that tor saw, one line per piece of evidence. */
  evidence: string[];
}

/** GET /api/exits `egress`: the egress probes (EGRESS_PROBE_URLS) and the exit list (EXIT_LIST). */
export interface ExitEgressView {
  /** EGRESS_PROBE_URLS names at least one URL. */
  probing: boolean;
  /** EXIT_LIST names a list. */
  exit_list: boolean;
  /** Probes made since start (those that found no worker or no turn are not counted). */
  probes: number;
  /** Of those, the ones that found no address. */
  failed: number;
  probes_last_hour: number;
  /** Mean and longest time of a probe (dial through tor, request, answer), ms. */
  mean_ms: number;
  max_ms: number;
}

/** Exits of one country (GET /api/exits). */
export interface ExitCountrySupply {
  /** Lower-case ISO 3166 code; `??` when the GeoIP database does not know the address. */
  country: string;
  /** In the catalog. */
  exits: number;
  /** Of those, not banned for everyone and not down. */
  eligible: number;
  /** Of those, assigned to an instance now. */
  in_use: number;
}

/** GET /api/exits. */
export interface ExitsView {
  /** EXIT_DISTINCT. */
  distinct_by: string;
  /** PIN_EXIT_RELAY: false when tor picks its own exits (nothing is assigned). */
  assigning: boolean;
  updated_at: string | null;
  eligible: number;
  /** How many instances can have an exit of their own (distinct units among the eligible). */
  capacity: number;
  in_use: number;
  /** Human-readable shortages per instance, empty while every instance has its own exit. */
  shortages: { instance: number; reason: string }[];
  /** The supply per country (a username's `country-` asks for one): what a session there can get. */
  countries: ExitCountrySupply[];
  exits: ExitView[];
  /** Bans in force, including those of exits no longer in the catalog. */
  bans: ExitBanView[];
  /** Exits down or on probation after dying, including those no longer in the catalog. */
  down: ExitDownView[];
  /** How the addresses exits leave from are measured, and what it cost so far (docs/performance.md). */
  egress: ExitEgressView;
  /** With STATE_STORE=redis://…: this node and every node whose lease is in force (supervisor/fleet); null otherwise. */
  fleet: { node: string; nodes: string[] } | null;
}

/** One instance of a node as GET /api/fleet shows it (a summary: the node's own API has the whole view). */
export interface FleetNodeInstance {
  id: number;
  ready: boolean;
  /** The health state (healthy, degraded, quarantined, probation, …). */
  state: string;
  exit_ip: string;
  exit_country: string;
  /** The assigned exit's fingerprint ('' when none). */
  exit_fingerprint: string;
  /** Why the instance has no exit of its own ('' when it has): a shortage is reported fleet-wide. */
  exit_shortage: string;
  sessions: number;
  requests: number;
}

/** One node of the fleet, as it last published itself (every NODE_LEASE / LEASE_RENEWALS_PER_TERM). */
export interface FleetNodeView {
  node: string;
  updated_at: string;
  routable: number;
  sessions: number;
  instances: FleetNodeInstance[];
}

/** GET /api/fleet: every live node with its instances; `node` is the one answering (null off a fleet). */
export interface FleetPoolView {
  node: string | null;
  nodes: FleetNodeView[];
}

export interface SessionRotateResult {
  session: string;
  instance: number;
  exit_ip: string;
  exit_confirmed: boolean;
  /** An addition of ours: false when no exit outside the session's recent exits could be found. */
  new_exit: boolean;
  /** Why new_exit is false ('' when it is true). */
  exit_note: string;
}

export interface FailureResult {
  session: string;
  instance: number;
  kind: string;
  /** false when the report was over its credential's CLIENT_REPORT_BUDGET: counted and audited, but weighing nothing against the exit. */
  scored: boolean;
  /**
   * An addition of ours: the session left the reported exit, moved by the report itself (always
   * tried, whatever the budget) or by the quarantine or site ban it caused. A client need not
   * rotate it again. false: nowhere else to go (exit_note says why).
   */
  moved: boolean;
  /** The exit the session leaves through now ('' while unknown). */
  exit_ip: string;
  /** false when the exit it moved to may be one of its recent exits (or it could not move). */
  new_exit: boolean;
  /** Why new_exit is false ('' when it is true). */
  exit_note: string;
}

export interface PoolRotateResult {
  rotating: number;
  in_progress: boolean;
}

/** 202 body of POST /api/pool/resize (documented in docs/api.md). */
export interface ResizeResult {
  size: number;
  previous: number;
  adding: number[];
  removing: number[];
}

/** One point of GET /api/stats/history (documented in docs/api.md). */
export interface StatsSample {
  /** End of the interval, ISO 8601 UTC. */
  time: string;
  /** Interval length in seconds (1 for the fine series, 60 for the long one). */
  interval_secs: number;
  requests: number;
  failures: number;
  bytes_up: number;
  bytes_down: number;
  latency_ms: { p50: number; p90: number; p99: number };
  /** Sessions and routable instances at the end of the interval (gauges). */
  sessions: number;
  routable: number;
}


/** The API shape of a session (docs/api.md, "Session"). */
export interface SessionView {
  key: string;
  instance: number;
  created_at: string;
  last_seen: string;
  requests: number;
  failures: number;
  bytes_up: number;
  bytes_down: number;
  active: number;
  session_port?: number;
  /** An addition of ours: the exit IP its instance last confirmed ('' while unknown) and its country. */
  exit_ip: string;
  exit_country: string;
  /** Exit IPs it left through before (newest last, EXIT_HISTORY of them): a rotation avoids them. */
  recent_exits: string[];
  /** What its username asked for (docs/api.md, "Session parameters in the username"). */
  params: SessionParamsView;
}

export interface SessionParamsView {
  /** Lower-case ISO 3166 codes its exit must be in; empty: any. */
  countries: string[];
  /** Its own idle lifetime in seconds; null: SESSION_TTL. */
  lifetime_secs: number | null;
  /** sticky (one exit until moved) or rotating (a different exit for each connection). */
  mode: 'sticky' | 'rotating';
}

