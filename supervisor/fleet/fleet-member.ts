import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { FleetNodeView, FleetPoolView } from '../../shared/api/views.js';
import type { FleetNodeSummary, FleetPoolPort } from './fleet-pool-port.js';
import type { Logger } from '../../shared/logger.js';
import { readFleetNodeView } from './fleet-node-view.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import { StartupError } from '../startup/startup-error.js';
import { closeRedis, redisClient, redisLocation } from '../state/redis-location.js';
import { FleetBans } from './fleet-bans.js';
import { FleetChannels } from './fleet-channels.js';
import { FleetLeases } from './fleet-leases.js';
import { FleetSessions } from './fleet-sessions.js';
import { FleetTokens } from './fleet-tokens.js';

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
  /** Where the other nodes reach this node's SOCKS listener (NODE_ADDRESS, SOCKS_PORT) and its API (API_PORT), to forward its sessions' connections and API requests to it. */
  address: { host: string; port: number; apiPort: number };
  /** How long a session's ownership outlives its last use: the longest a session can live idle (SESSION_TTL, SESSION_TTL_MAX). */
  sessionLifetimeMs: number;
  log: Logger;
}

/** What the API says about the fleet. */
export interface FleetView {
  node: string;
  /** Nodes whose lease was in force at the last renewal, this one included. */
  nodes: string[];
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
  /** Live nodes (this one too) and their SOCKS listeners, as of the last renewal. */
  private addresses: ReadonlyMap<string, string> = new Map();
  private leaving = false;
  /** Whether the last renewal reached Redis (pool_redis_reachable). */
  private renewedLast = true;
  private readonly unreachable: ThrottledWarning;
  /** Which node owns each named session. */
  readonly sessions: FleetSessions;
  /** The issued tokens every node serves; started by the service (shareTokens). */
  readonly tokens: FleetTokens;
  /** The exit bans every node keeps; started with manageExits. */
  readonly bans: FleetBans;
  /** The one subscriber connection the tokens' and the bans' channels share. */
  private readonly channels: FleetChannels;
  private tokensShared = false;
  /** Keys of the sessions this node served since a time (their ownership is refreshed). */
  private usedSessions: (since: number) => string[] = () => [];
  /** When the sessions' ownership was last refreshed: moves only when a refresh reached Redis, so none is skipped. */
  private refreshedAt = Date.now();
  /** What this node says of itself to the fleet (GET /api/fleet); null until the service says. */
  private summary: (() => FleetNodeSummary) | null = null;
  /** Sessions this node served that another live node owns: given up here. */
  private giveUp: (sessions: { key: string; owner: string }[]) => void = () => undefined;

  private constructor(
    private readonly options: FleetMemberOptions,
    private readonly redis: Redis,
    private readonly leases: FleetLeases,
    /** This process's value of the node lease: another process under the same name cannot renew it. */
    private readonly token: string,
    poolPrefix: string,
    forwardPassword: string,
  ) {
    this.sessions = new FleetSessions(redis, leases, options.node, () => this.addresses, options.sessionLifetimeMs + options.leaseMs, forwardPassword, options.log);
    this.channels = new FleetChannels(redis);
    this.tokens = new FleetTokens(redis, this.channels, poolPrefix, options.log);
    this.bans = new FleetBans(redis, this.channels, poolPrefix, options.log);
    this.unreachable = new ThrottledWarning(options.log, 'Redis cannot be reached: serving with the exit leases known so far', { level: 'warn' });
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
      throw new StartupError('STATE_STORE', `Redis at ${where.shown} cannot be reached: ${(error as Error).message}`);
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
      const password = await leases.forwardSecret(`tf_${randomBytes(32).toString('base64url')}`);
      member = new FleetMember(options, redis, leases, token, where.poolPrefix, password);
      await member.publishAddress();
    } catch (error) {
      await leases.releaseAll([key], token).catch(() => undefined);
      await closeRedis(redis);
      throw new StartupError('STATE_STORE', `Redis at ${where.shown} failed while this node joined: ${(error as Error).message}`);
    }
    options.log.info('joined the fleet', { node: options.node, redis: where.shown, address: member.addressText });
    member.timer = setInterval(() => member.renew(), Math.floor(options.leaseMs / LEASE_RENEWALS_PER_TERM));
    return member;
  }

  get node(): string {
    return this.options.node;
  }

  /** SHA-256 (hex) of the forwarding secret: the proxy workers recognise a forwarded connection by it. */
  get forwardDigest(): string {
    return createHash('sha256').update(this.sessions.forwardPassword).digest('hex');
  }

  /**
   * From now on this node's issued tokens are the fleet's: `local` (auth.json's) join the list,
   * and `apply` gets the list now, at every change any node makes, and at every renewal.
   */
  async shareTokens(local: Parameters<FleetTokens['start']>[0], apply: Parameters<FleetTokens['start']>[1]): Promise<void> {
    await this.tokens.start(local, apply);
    this.tokensShared = true;
  }

  /**
   * From now on this node's pool is the fleet's: its sessions' ownership is renewed (and those
   * another node owns are given up), it describes itself at every renewal, and, with exit
   * assignments, its exits are leased (manageExits).
   */
  async attachPool(pool: FleetPoolPort, exits: ExitAssignments | undefined): Promise<void> {
    this.summary = () => pool.nodeSummary();
    this.usedSessions = (since) => pool.sessionKeysUsedSince(since);
    this.giveUp = (sessions) => pool.giveUpSessions(sessions);
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

  private async publishAddress(): Promise<void> {
    await this.leases.publishAddress(this.options.node, this.addressText, this.apiAddressText, this.options.leaseMs);
    const addresses = await this.leases.nodeAddresses();
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
      await this.leases.forgetApiAddress(this.options.node);
      await this.leases.dropSummary(this.options.node);
      await this.leases.releaseAll([this.leases.nodeKey(this.options.node)], this.token);
    };
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([giveUp().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, LEAVE_TIMEOUT_MS)))]);
    clearTimeout(timer);
    this.unreachable.flush();
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
        this.unreachable.note({ error: (error as Error).message });
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
    await this.publishAddress();
    if (this.summary) {
      const self: FleetNodeView = { node, updated_at: new Date().toISOString(), ...this.summary() };
      await this.leases.publishSummary(node, JSON.stringify(self), leaseMs);
    }
    this.sessions.forgetGoneOwners();
    const startedAt = Date.now();
    const ownedElsewhere = await this.sessions.refresh(this.usedSessions(this.refreshedAt));
    this.refreshedAt = startedAt;
    if (ownedElsewhere.length > 0) this.giveUp(ownedElsewhere);
    if (this.tokensShared) await this.tokens.resync();
    if (this.exits) {
      await this.bans.sharePending();
      await this.bans.resync();
      await this.reconcileExits(this.exits);
    }
  }

  private async reconcileExits(exits: ExitAssignments): Promise<void> {
    const { node, leaseMs } = this.options;
    const mine = [...exits.heldFingerprints()];
    const holders = await this.leases.claimAll(
      mine.map((fp) => this.leases.exitKey(fp)),
      node,
      leaseMs,
    );
    const kept = new Set<string>();
    const lost: [string, string][] = [];
    mine.forEach((fp, i) => {
      const holder = holders[i] as string;
      if (holder === node) kept.add(fp);
      else lost.push([fp, holder]);
    });
    const dropped = [...this.claimed].filter((fp) => !kept.has(fp) && !mine.includes(fp));
    this.claimed = kept;
    await this.leases.releaseAll(
      dropped.map((fp) => this.leases.exitKey(fp)),
      node,
    );
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
    const { node, leaseMs } = this.options;
    const mine = [...exits.heldUnits().keys()];
    const holders = await this.leases.claimAll(
      mine.map((u) => this.leases.unitKey(u)),
      node,
      leaseMs,
    );
    const kept = new Set<string>();
    const lost: [string, string][] = [];
    mine.forEach((u, i) => {
      const holder = holders[i] as string;
      if (holder === node) kept.add(u);
      else lost.push([u, holder]);
    });
    const dropped = [...this.claimedUnits].filter((u) => !kept.has(u));
    this.claimedUnits = kept;
    await this.leases.releaseAll(
      dropped.map((u) => this.leases.unitKey(u)),
      node,
    );
    for (const [u, holder] of lost) exits.yieldUnit(u, holder);
    const elsewhere = new Map([...(await this.leases.unitHolders())].filter(([, holder]) => holder !== node));
    exits.setUnitsHeldElsewhere(elsewhere);
  }
}
