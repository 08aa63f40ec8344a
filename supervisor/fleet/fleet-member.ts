import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { FleetNodeView, FleetPoolView } from '../../shared/api/views.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { FleetNodeSummary, FleetPoolPort } from './fleet-pool-port.js';
import type { Logger } from '../../shared/logger.js';
import { readFleetNodeView } from './fleet-node-view.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import { StartupError } from '../startup/startup-error.js';
import { closeRedis, redisClient, redisLocation } from '../state/redis-location.js';
import { FleetBans } from './fleet-bans.js';
import { FleetBudgets } from './fleet-budgets.js';
import { FleetChannels } from './fleet-channels.js';
import { encodeEpoch, FleetEpochKey, type Epoch, type EpochStanding } from './fleet-epoch.js';
import { EpochFileError, type EpochMemory } from './fleet-epoch-file.js';
import { FleetHopKeys } from './fleet-hop-keys.js';
import { FleetLeases } from './fleet-leases.js';
import { FleetSessions } from './fleet-sessions.js';
import { FleetTokens, type FleetTokenStore } from './fleet-tokens.js';

/** A lease is renewed this many times per NODE_LEASE, so two renewals can fail before it lapses. */
export const LEASE_RENEWALS_PER_TERM = 3;
/** How often a start looks again at a node name whose lease is still held. */
const NODE_LEASE_RETRY_MS = 250;
/**
 * A fleet command Redis has not answered after this long fails: a session's first connection on
 * a node waits for its claim at most this long before being served here (README.md here).
 */
export const FLEET_COMMAND_TIMEOUT_MS = 1_000;
/** Shutdown gives up on an unreachable Redis after this long (the leases then lapse on their own). */
const LEAVE_TIMEOUT_MS = 2_000;

export interface FleetMemberOptions {
  /** STATE_STORE (a redis:// URL). */
  url: string;
  /** NODE_NAME. */
  node: string;
  /** NODE_LEASE. */
  leaseMs: number;
  /** Where the other nodes reach this node's hop listener (NODE_ADDRESS, HOP_PORT) and its API (API_PORT), to forward its sessions' connections and API requests to it. */
  address: { host: string; port: number; apiPort: number };
  /** How long a session's ownership outlives its last use: the longest a session can live idle (SESSION_TTL, SESSION_TTL_MAX). */
  sessionLifetimeMs: number;
  /** Where this node remembers the epoch of its fleet (DATA_DIR/fleet-epoch.json). */
  epochs: EpochMemory;
  /** FLEET_RESEED: the lost epoch to re-seed the fleet from this node's own knowledge; '' to never. */
  reseed: string;
  log: Logger;
}

/** What the API says about the fleet. */
export interface FleetView {
  node: string;
  /** Nodes whose lease was in force at the last renewal, this one included. */
  nodes: string[];
}

/** What a node records when its standing with the fleet changes (a message, and the details for the audit trail). */
interface StandingNote {
  level: 'info' | 'error';
  message: string;
  details: Record<string, unknown>;
}

/**
 * This node's membership of a fleet sharing one Redis (README.md here): its node lease, which
 * keeps a second process from running under the same NODE_NAME, and the leases on the exits its
 * instances pin, which keep every other node off them. Everything runs on a timer, off the
 * request path: routing reads only what the last renewal left in ExitAssignments.
 */
export class FleetMember {
  private timer: NodeJS.Timeout | null = null;
  private exits: ExitAssignments | undefined;
  /** Exit leases this node held at the last renewal. */
  private claimed = new Set<string>();
  /** Unit leases (a /24, a family: supervisor/exits, EXIT_DISTINCT) this node held at the last renewal. */
  private claimedUnits = new Set<string>();
  private running: Promise<void> | null = null;
  private again = false;
  private scheduled: NodeJS.Immediate | null = null;
  /** Live nodes (this one too) and their hop listeners, as of the last renewal. */
  private addresses: ReadonlyMap<string, string> = new Map();
  /** Whether Redis holds this node's fleet (its epoch), as of the last renewal. */
  private standing: EpochStanding;
  private readonly epochKey: FleetEpochKey;
  /** Repeated while the node is not a member (an error line said why the first time). */
  private readonly stillLost: ThrottledWarning;
  /** The audit trail, once the pool is attached; standing changes before that wait here. */
  private audit: AuditLog | null = null;
  private readonly unaudited: StandingNote[] = [];
  private leaving = false;
  /** Whether the last renewal reached Redis (pool_redis_reachable). */
  private renewedLast = true;
  /**
   * Until when peers known before Redis was unreachable are kept although their records are
   * missing (awaited): set at the first renewal that reaches Redis again (publishAddress).
   */
  private awaitPeersUntil = 0;
  private readonly unreachable: ThrottledWarning;
  /** Which node owns each named session. */
  readonly sessions: FleetSessions;
  /** The issued tokens every node serves; started by the service (shareTokens). */
  readonly tokens: FleetTokens;
  /** The exit bans every node keeps; started with manageExits. */
  readonly bans: FleetBans;
  /** The one subscriber connection the tokens' and the bans' channels share. */
  private readonly channels: FleetChannels;
  /** This node's hop keys, and its peers'. */
  readonly hopKeys: FleetHopKeys;
  /** Every per-credential budget of the verdicts, counted across the fleet. */
  readonly budgets: FleetBudgets;
  private tokensShared = false;
  /** Keys of the sessions this node served since a time (their ownership is refreshed). */
  private usedSessions: (since: number) => string[] = () => [];
  /** When the sessions' ownership was last refreshed: moves only when a refresh reached Redis, so none is skipped. */
  private refreshedAt = Date.now();
  /** What this node says of itself to the fleet (GET /api/fleet); null until the service says. */
  private summary: (() => FleetNodeSummary) | null = null;
  /** Sessions this node served that another live node owns: given up here. */
  private giveUp: (sessions: { key: string; owner: string }[]) => void = () => undefined;
  /** Whether this node's table still holds a session (a copy held back is asked again only while it does). */
  private holdsSession: (key: string) => boolean = () => false;
  /**
   * Copies this node serves of sessions another node owns, kept because that owner could not be
   * reached yet (its hop keys not learnt): asked again at each renewal until it can be, even when
   * nobody uses them meanwhile, so that no name stays on two nodes.
   */
  private heldBack = new Map<string, string>();

  private constructor(
    private readonly options: FleetMemberOptions,
    private readonly redis: Redis,
    private readonly leases: FleetLeases,
    /** This process's value of the node lease: another process under the same name cannot renew it. */
    private readonly token: string,
    private readonly poolPrefix: string,
    standing: EpochStanding,
  ) {
    this.standing = standing;
    this.epochKey = new FleetEpochKey(redis, poolPrefix);
    this.hopKeys = new FleetHopKeys(options.node, options.leaseMs);
    this.sessions = new FleetSessions(redis, leases, options.node, () => this.addresses, options.sessionLifetimeMs + options.leaseMs, this.hopKeys, options.log);
    this.channels = new FleetChannels(redis);
    this.tokens = new FleetTokens(redis, this.channels, poolPrefix, () => this.memberEpoch(), options.log);
    this.bans = new FleetBans(redis, this.channels, poolPrefix, options.log, () => this.isMember);
    this.budgets = new FleetBudgets(redis, poolPrefix, options.log);
    this.unreachable = new ThrottledWarning(options.log, 'Redis cannot be reached: serving with the exit leases known so far', { level: 'warn' });
    this.stillLost = new ThrottledWarning(options.log, 'Redis still does not hold this node’s fleet: serving what this node knows; nothing is shared but revocations until the fleet is re-seeded (FLEET_RESEED)', { level: 'warn', intervalMs: 60_000 });
  }

  /**
   * Connects and takes the node lease. A lease still held is waited for one NODE_LEASE (a node
   * killed a moment ago); a name still held after that is another running process: StartupError.
   */
  static async join(options: FleetMemberOptions): Promise<FleetMember> {
    const where = redisLocation(options.url);
    const redis = redisClient(where, { commandTimeoutMs: FLEET_COMMAND_TIMEOUT_MS });
    try {
      await redis.connect();
    } catch (error) {
      redis.disconnect();
      throw new StartupError('STATE_STORE', `Redis at ${where.shown} cannot be reached: ${errorMessage(error)}`);
    }
    const leases = new FleetLeases(redis, where.poolPrefix);
    const token = `${options.node}/${process.pid}/${randomUUID()}`;
    const key = leases.nodeKey(options.node);
    const deadline = Date.now() + options.leaseMs + 2 * NODE_LEASE_RETRY_MS;
    for (let waited = false; ; waited = true) {
      const holder = await leases.claim(key, token, options.leaseMs);
      if (holder === token) break;
      if (Date.now() > deadline) {
        await closeRedis(redis);
        throw new StartupError(
          'NODE_NAME',
          `another running exitpool holds node name "${options.node}" on ${where.shown} (its lease was renewed within the last NODE_LEASE); give every node its own NODE_NAME`,
        );
      }
      if (!waited) options.log.info('node name still leased (a previous run that ended abruptly?); waiting for the lease to lapse', { node: options.node, leaseMs: options.leaseMs });
      await new Promise((resolve) => setTimeout(resolve, NODE_LEASE_RETRY_MS));
    }
    let member: FleetMember;
    try {
      const remembered = await options.epochs.load(where.poolPrefix);
      const standing = await new FleetEpochKey(redis, where.poolPrefix).judge(remembered, { mayCreate: true, reseed: options.reseed });
      member = new FleetMember(options, redis, leases, token, where.poolPrefix, standing);
      await member.settleStanding(remembered, standing);
      await member.publishAddress();
    } catch (error) {
      await leases.releaseAll([key], token).catch(() => undefined);
      await closeRedis(redis);
      if (error instanceof EpochFileError) throw new StartupError('DATA_DIR', error.message);
      throw new StartupError('STATE_STORE', `Redis at ${where.shown} failed while this node joined: ${errorMessage(error)}`);
    }
    options.log.info('joined the fleet', { node: options.node, redis: where.shown, address: member.addressText, epoch: member.epochText, member: member.isMember });
    member.timer = setInterval(() => member.renew(), Math.floor(options.leaseMs / LEASE_RENEWALS_PER_TERM));
    return member;
  }

  get node(): string {
    return this.options.node;
  }

  /** Whether Redis holds this node's fleet (as of the last renewal): tokens, bans and hop keys are shared only then. */
  get isMember(): boolean {
    return this.standing.kind === 'member';
  }

  /** The epoch this node belongs to (or remembers, when Redis lost it), as Redis keeps it; '' for none. */
  get epochText(): string {
    const epoch = this.standing.kind === 'member' ? this.standing.epoch : this.standing.remembered;
    return epoch === null ? '' : encodeEpoch(epoch);
  }

  private memberEpoch(): { key: string; text: string } | null {
    return this.standing.kind === 'member' ? { key: this.epochKey.key, text: encodeEpoch(this.standing.epoch) } : null;
  }

  /**
   * From now on this node's issued tokens are the fleet's: its store's tokens join the list
   * (unless revoked anywhere), every revocation any node knows is remembered, and the store gets
   * the list now, at every change any node makes, and at every renewal.
   */
  async shareTokens(store: FleetTokenStore): Promise<void> {
    await this.tokens.start(store);
    this.tokensShared = true;
  }

  /**
   * From now on this node's pool is the fleet's: its sessions' ownership is renewed (and those
   * another node owns are given up), it describes itself at every renewal, its standing changes
   * are audited, and, with exit assignments, its exits are leased (manageExits).
   */
  async attachPool(pool: FleetPoolPort, exits: ExitAssignments | undefined, audit: AuditLog): Promise<void> {
    this.summary = () => pool.nodeSummary();
    this.usedSessions = (since) => pool.sessionKeysUsedSince(since);
    this.giveUp = (sessions) => pool.giveUpSessions(sessions);
    this.holdsSession = (key) => pool.holdsSession(key);
    this.audit = audit;
    for (const note of this.unaudited.splice(0)) this.record(note);
    if (exits) await this.manageExits(exits);
  }

  /** GET /api/fleet: every live node as it last described itself, checked, by name. */
  async poolView(): Promise<FleetPoolView> {
    const nodes: FleetNodeView[] = [];
    for (const [node, text] of await this.leases.summaries()) {
      const view = readFleetNodeView(node, text);
      if (view !== null) nodes.push(view);
    }
    return { node: this.options.node, nodes: nodes.sort((a, b) => a.node.localeCompare(b.node)) };
  }

  private get addressText(): string {
    const { host, port } = this.options.address;
    return `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  private get apiAddressText(): string {
    const { host, apiPort } = this.options.address;
    return `${host.includes(':') ? `[${host}]` : host}:${apiPort}`;
  }

  /** The node's address (it is live), its hop keys while a member; then every live node's address, hop keys and process. */
  private async publishAddress(): Promise<void> {
    const { node, leaseMs } = this.options;
    // Hop keys before the address: a peer that sees this node alive (its address) can then sign
    // hops to it. The other way round, after an outage of Redis had both lapse, a peer renewing
    // between the two writes took this node for alive but unreachable until its next renewal,
    // and served this node's sessions itself meanwhile (another exit IP for their clients).
    if (this.isMember) await this.leases.publishHopKeys(node, this.hopKeys.publication(this.token), leaseMs);
    await this.leases.publishAddress(node, this.addressText, this.apiAddressText, leaseMs);
    const addresses = await this.leases.nodeAddresses();
    // Back from an outage of Redis that outlasted the leases, every peer's records have lapsed
    // until its own first renewal, up to a renewal interval later: a peer known before is awaited
    // for one NODE_LEASE, not taken for gone (which made this node serve the peer's sessions
    // itself, through another exit, in that interval). One that died meanwhile is forwarded to
    // for that long, as for one that died while Redis was up (its lease runs out first).
    const now = Date.now();
    if (!this.renewedLast) this.awaitPeersUntil = now + leaseMs;
    const awaited = new Set<string>();
    if (now < this.awaitPeersUntil) {
      for (const [peer, address] of this.addresses) {
        if (peer === node || addresses.has(peer)) continue;
        addresses.set(peer, address);
        awaited.add(peer);
      }
    }
    const peers = await this.leases.peerRecords([...addresses.keys()].filter((n) => n !== node && !awaited.has(n)));
    // Only a fleet this node belongs to says who publishes what: otherwise the keys known are kept.
    this.hopKeys.learn(this.isMember ? peers.keys : new Map(), peers.processes, this.isMember, awaited);
    this.addresses = addresses;
  }

  /** Whether this node's last renewal reached Redis; true before the first. */
  get redisReachable(): boolean {
    return this.renewedLast;
  }

  view(): FleetView {
    // Before the first renewal only this node is known (it is always among the live ones after).
    return { node: this.options.node, nodes: this.addresses.size === 0 ? [this.options.node] : [...this.addresses.keys()].sort() };
  }

  /**
   * From now on this node's exit assignments are leased: claimed as soon as they change and at
   * every renewal, yielded when another node held the exit first, and exits other nodes hold
   * are never assigned here. Resolves after the first renewal, so the first assignments
   * already see the other nodes' exits.
   */
  async manageExits(exits: ExitAssignments): Promise<void> {
    this.exits = exits;
    exits.on('assignments-changed', this.soon);
    await this.bans.start(exits);
    await this.renew();
  }

  /** Gives up the exit leases and the node lease; the other nodes may take the exits at once. */
  async leave(): Promise<void> {
    this.leaving = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    this.exits?.off('assignments-changed', this.soon);
    const giveUp = async (): Promise<void> => {
      await this.running;
      await this.leases.releaseAll([...this.claimed].map((fp) => this.leases.exitKey(fp)), this.options.node);
      await this.leases.releaseAll([...this.claimedUnits].map((u) => this.leases.unitKey(u)), this.options.node);
      await this.leases.releaseAll([this.leases.addressKey(this.options.node)], this.addressText);
      await this.leases.dropHopKeys(this.options.node, this.token);
      await this.leases.forgetApiAddress(this.options.node);
      await this.leases.dropSummary(this.options.node);
      await this.leases.releaseAll([this.leases.nodeKey(this.options.node)], this.token);
    };
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([giveUp().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, LEAVE_TIMEOUT_MS)))]);
    clearTimeout(timer);
    this.unreachable.flush();
    this.stillLost.flush();
    this.budgets.stop();
    this.bans.stop();
    await this.channels.close();
    await closeRedis(this.redis);
  }

  private readonly soon = (): void => {
    if (this.leaving) return;
    this.scheduled ??= setImmediate(() => {
      this.scheduled = null;
      void this.renew();
    });
  }

  /** One renewal at a time; a change during one runs another right after it. */
  private renew(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.renewOnce()
      .then(() => void (this.renewedLast = true))
      .catch((error: unknown) => {
        this.renewedLast = false;
        this.unreachable.note({ error: errorMessage(error) });
      })
      .finally(() => {
        this.running = null;
        if (this.again && !this.leaving) {
          this.again = false;
          void this.renew();
        }
      });
    return this.running;
  }

  private async renewOnce(): Promise<void> {
    const { node, leaseMs } = this.options;
    const holder = await this.leases.claim(this.leases.nodeKey(node), this.token, leaseMs);
    if (holder !== this.token) this.options.log.error('another process took this node name while its lease had lapsed; give every node its own NODE_NAME', { node });
    // The sessions' ownership first, in the same breath as the node's own lease: after Redis was
    // away long enough for them to lapse, another node that sees this one alive again must find
    // its sessions claimed, not free to start afresh on another exit.
    const startedAt = Date.now();
    const used = this.usedSessions(this.refreshedAt);
    const usedNow = new Set(used);
    const heldBack = [...this.heldBack.keys()].filter((key) => !usedNow.has(key) && this.holdsSession(key));
    const ownedElsewhere = await this.sessions.refresh([...used, ...heldBack]);
    this.refreshedAt = startedAt;
    this.heldBack = new Map(ownedElsewhere.map((s) => [s.key, s.owner]));
    await this.checkStanding();
    await this.publishAddress();
    // After publishAddress, which learns the peers' hop keys: an owner back from an outage of Redis
    // is reachable in the same renewal that finds it owning a name this node served meanwhile.
    this.settleCopies();
    if (this.summary) {
      const self: FleetNodeView = { node, updated_at: new Date().toISOString(), ...this.summary() };
      await this.leases.publishSummary(node, JSON.stringify(self), leaseMs);
    }
    this.sessions.forgetGoneOwners();
    if (this.tokensShared) await this.tokens.resync();
    if (this.exits) {
      if (this.isMember) await this.bans.sharePending();
      await this.bans.resync();
      await this.reconcileExits(this.exits);
    }
    this.hopKeys.rotateIfDue(!this.isMember);
    await this.budgets.flush();
  }

  /**
   * Gives up the copies whose owner this node can sign a hop to. One it cannot reach stays here
   * (giving it up would only start it again here) and is asked about again at the next renewal.
   */
  private settleCopies(): void {
    const reachable: { key: string; owner: string }[] = [];
    for (const [key, owner] of this.heldBack) {
      if (!this.hopKeys.canReach(owner)) continue;
      reachable.push({ key, owner });
      this.heldBack.delete(key);
    }
    if (reachable.length > 0) this.giveUp(reachable);
  }

  /**
   * At the join: remembers the epoch of a fleet this node now belongs to, and says how it joined
   * (created, joined, re-seeded) or that it is not a member (Redis lost its data).
   */
  private async settleStanding(remembered: Epoch | null, standing: EpochStanding): Promise<void> {
    if (standing.kind === 'member') {
      if (standing.how !== 'same') {
        try {
          await this.options.epochs.save(this.poolPrefix, standing.epoch);
        } catch (error) {
          // Not remembered, the next start could not tell a Redis that lost its data from a new fleet.
          throw new EpochFileError(this.options.epochs.where, `cannot be written (${errorMessage(error)})`);
        }
        this.note(joinedNote(standing, remembered));
      }
    } else {
      this.note(lostNote(standing));
    }
    if (this.options.reseed !== '' && !(standing.kind === 'member' && standing.how === 'reseeded')) {
      this.options.log.warn('FLEET_RESEED is set but names no lost epoch of this node: nothing re-seeded (remove the setting)', { reseed: this.options.reseed, epoch: this.epochText });
    }
  }

  /** At each renewal: whether Redis still holds this node's fleet, or holds it again (re-seeded by another node, or restored). */
  private async checkStanding(): Promise<void> {
    const before = this.standing;
    const remembered = before.kind === 'member' ? before.epoch : before.remembered;
    const now = await this.epochKey.judge(remembered, { mayCreate: false, reseed: '' });
    this.standing = now;
    if (now.kind === 'lost') {
      if (before.kind === 'member') this.note(lostNote(now));
      else this.stillLost.note({ epoch: this.epochText });
      return;
    }
    const sameAsBefore = before.kind === 'member' && encodeEpoch(before.epoch) === encodeEpoch(now.epoch);
    if (sameAsBefore) return;
    if (now.how !== 'same') {
      await this.options.epochs.save(this.poolPrefix, now.epoch).catch((error: unknown) =>
        this.options.log.error('the fleet’s new epoch could not be remembered in DATA_DIR: a restart of this node will not recognise its fleet until then', { file: this.options.epochs.where, error: errorMessage(error) }),
      );
    }
    this.note({
      level: 'info',
      message:
        now.how === 'same'
          ? `Redis holds this node's fleet again (epoch ${now.epoch.id}): tokens, bans and hop keys are shared again`
          : `the fleet was re-seeded (epoch ${now.epoch.id}, continuing ${remembered?.id ?? 'none'}): this node's tokens (but those revoked anywhere), bans and hop keys join it`,
      details: { reason: 'fleet_rejoined', epoch: now.epoch.id },
    });
    if (this.tokensShared) await this.tokens.rejoined();
    if (this.exits) await this.bans.rejoined();
  }

  private note(note: StandingNote): void {
    this.options.log[note.level](note.message, { node: this.options.node, ...note.details });
    if (this.audit) this.record(note);
    else this.unaudited.push(note);
  }

  private record(note: StandingNote): void {
    this.audit?.record({ type: 'auth', instance: null, session: null, message: note.message, details: note.details });
  }

  /**
   * Claims (or renews) this node's leases on `mine` (exits or units): those another node holds are
   * `lost` with their holder; those claimed before and no longer wanted are released.
   */
  private async claimLeases(mine: readonly string[], claimedBefore: ReadonlySet<string>, keyOf: (name: string) => string): Promise<{ kept: Set<string>; lost: [string, string][] }> {
    const { node, leaseMs } = this.options;
    const holders = await this.leases.claimAll(mine.map(keyOf), node, leaseMs);
    const kept = new Set<string>();
    const lost: [string, string][] = [];
    mine.forEach((name, i) => {
      const holder = holders[i] as string;
      if (holder === node) kept.add(name);
      else lost.push([name, holder]);
    });
    const dropped = [...claimedBefore].filter((name) => !kept.has(name) && !mine.includes(name));
    await this.leases.releaseAll(dropped.map(keyOf), node);
    return { kept, lost };
  }

  private async reconcileExits(exits: ExitAssignments): Promise<void> {
    const { node } = this.options;
    const mine = [...exits.heldFingerprints()];
    const { kept, lost } = await this.claimLeases(mine, this.claimed, (fp) => this.leases.exitKey(fp));
    this.claimed = kept;
    for (const [fp, holder] of lost) exits.yieldExit(fp, holder);
    const elsewhere = new Map([...(await this.leases.exitHolders())].filter(([, holder]) => holder !== node));
    exits.setHeldElsewhere(elsewhere);
    await this.reconcileUnits(exits);
  }

  /**
   * The distinctness units (EXIT_DISTINCT: the /24 an exit's traffic leaves from, its family)
   * this node's instances hold on exits assigned as distinct are leased like the exits, so no two
   * instances anywhere in the fleet share one while the catalog allows: a unit another node
   * claimed first is yielded (its instances move), and the units other nodes hold count as taken
   * in every choice here. Exits assigned in a shortage lease no unit: they share by necessity,
   * and say so (`exit_shortage`, in the node's summary too).
   */
  private async reconcileUnits(exits: ExitAssignments): Promise<void> {
    const { node } = this.options;
    const mine = [...exits.heldUnits().keys()];
    const { kept, lost } = await this.claimLeases(mine, this.claimedUnits, (u) => this.leases.unitKey(u));
    this.claimedUnits = kept;
    for (const [u, holder] of lost) exits.yieldUnit(u, holder);
    const elsewhere = new Map([...(await this.leases.unitHolders())].filter(([, holder]) => holder !== node));
    exits.setUnitsHeldElsewhere(elsewhere);
  }
}

function joinedNote(standing: Extract<EpochStanding, { kind: 'member' }>, remembered: Epoch | null): StandingNote {
  const id = standing.epoch.id;
  switch (standing.how) {
    case 'created':
      return { level: 'info', message: `a new fleet: this node created its epoch ${id}`, details: { reason: 'fleet_created', epoch: id } };
    case 'reseeded':
      return {
        level: 'info',
        message: `FLEET_RESEED: the fleet re-seeded from this node's knowledge (epoch ${id}, continuing ${remembered?.id ?? 'none'}); every node that knew the lost epoch joins it`,
        details: { reason: 'fleet_reseeded', epoch: id, continues: remembered?.id ?? null },
      };
    default:
      return { level: 'info', message: `joined the fleet of epoch ${id}`, details: { reason: standing.how === 'rejoined' ? 'fleet_rejoined' : 'fleet_joined', epoch: id } };
  }
}

function lostNote(standing: Extract<EpochStanding, { kind: 'lost' }>): StandingNote {
  const mine = standing.remembered?.id ?? null;
  const found = standing.found?.id ?? null;
  const what = found === null ? 'holds no fleet epoch (it lost its data?)' : `holds another fleet's epoch (${found})`;
  return {
    level: 'error',
    message:
      `Redis ${what}, not this node's (${mine ?? 'none'}): this node serves the tokens, bans and sessions it knows, shares nothing but revocations, and takes no token or ban from Redis; ` +
      `to re-seed the fleet from one node's knowledge, restart it with FLEET_RESEED=${mine ?? '<its epoch>'} (docs/operations.md, "When Redis lost its data")`,
    details: { reason: 'fleet_data_lost', epoch: mine, found },
  };
}
