import { randomBytes, type KeyObject } from 'node:crypto';
import { hopKeyObject, hopWindow, isHopKeyId, sessionHopKey, type HopGrant, type HopKey } from '../../shared/auth/hop-credential.js';
import type { HopKeySnapshot } from '../../shared/ipc/protocol.js';

/** A node makes a new hop key this often; the one before stays valid for the overlap (FleetHopKeys). */
export const HOP_KEY_ROTATION_MS = 60 * 60_000;
/** Keys a node publishes at most (the newest and those still in their overlap); more in a peer's record is not ours. */
const MAX_KEYS = 4;
const SECRET = /^[A-Za-z0-9_-]{43}$/;
/** The node lease's value (`<node>/<pid>/<uuid>`): which process a peer's keys belong to. */
const PROCESS = /^[A-Za-z0-9_.-]{1,64}\/[0-9]{1,10}\/[0-9a-f-]{36}$/;

/**
 * This node's hop keys and the ones it knows of its peers (README.md here, "Hop credentials").
 *
 * Where the keys live: a node's own keys are made at its start and every HOP_KEY_ROTATION_MS, in
 * its supervisor's memory and its proxy workers' (which check hops with them), never on disk: a
 * restart revokes every one. While the node is a member of the fleet Redis holds, it publishes
 * them (`fleet:hop-keys:<node>`, with the lease) for its peers' supervisors, which derive from
 * them a key per session and window for their workers (`grant`). A Redis that loses its data
 * loses only copies: each node keeps its keys and its peers' (and stops rotating, since its peers
 * could not learn a new key), so forwarding between the nodes that knew each other goes on;
 * nothing is published again until the node is a member again.
 */
export class FleetHopKeys {
  /** Newest first. */
  private own: { key: HopKey; createdAt: number }[] = [];
  private version = 0;
  private readonly listeners: ((snapshot: HopKeySnapshot) => void)[] = [];
  /** Each peer's keys (newest first, the newest also as a KeyObject) and the process they came from. */
  private peers = new Map<string, Peer>();
  /** Each live peer's process (its node lease), as of the last renewal. */
  private processes: ReadonlyMap<string, string> = new Map();

  constructor(
    private readonly node: string,
    /** How long a replaced key stays valid: long enough for every peer to read its successor (NODE_LEASE). */
    private readonly overlapMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.add();
  }

  snapshot(): HopKeySnapshot {
    return { version: this.version, node: this.node, keys: this.own.map((k) => k.key) };
  }

  /** Called with the new snapshot after each change (the service pushes it to the proxy workers). */
  onChange(listener: (snapshot: HopKeySnapshot) => void): void {
    this.listeners.push(listener);
  }

  /**
   * At each renewal: a new key when the newest is HOP_KEY_ROTATION_MS old (not while `paused`: a
   * node whose Redis lost the fleet could not tell its peers), and replaced keys dropped once their
   * overlap is over.
   */
  rotateIfDue(paused: boolean): void {
    const now = this.now();
    const newest = this.own[0];
    let changed = false;
    if (!paused && newest !== undefined && now - newest.createdAt >= HOP_KEY_ROTATION_MS) {
      this.add();
      changed = true;
    }
    const kept = this.own.filter((_, i) => i === 0 || now - (this.own[i - 1] as { createdAt: number }).createdAt < this.overlapMs);
    if (kept.length !== this.own.length) {
      this.own = kept;
      changed = true;
    }
    if (changed) this.changed();
  }

  /** What this node publishes: its process (the node lease's value) and its keys, `<process> <id>:<secret>…`. */
  publication(process: string): string {
    return [process, ...this.own.map((k) => `${k.key.id}:${k.key.secret}`)].join(' ');
  }

  /**
   * What the renewal read: each live peer's published keys and its process. A peer whose record
   * is missing keeps the keys known unless `complete` (Redis holds this node's fleet, so a missing
   * record is a peer that stopped publishing). An `awaited` peer (known before an outage of
   * Redis, not renewed since it returned) keeps its keys and its process either way.
   */
  learn(records: ReadonlyMap<string, string>, processes: ReadonlyMap<string, string>, complete: boolean, awaited: ReadonlySet<string> = new Set()): void {
    const before = this.processes;
    const merged = new Map(processes);
    for (const peer of awaited) {
      const process = before.get(peer);
      if (!merged.has(peer) && process !== undefined) merged.set(peer, process);
    }
    this.processes = merged;
    const next = complete ? new Map<string, Peer>() : new Map(this.peers);
    for (const peer of awaited) {
      const known = this.peers.get(peer);
      if (known !== undefined && !records.has(peer)) next.set(peer, known);
    }
    for (const [peer, text] of records) {
      if (peer === this.node) continue;
      const known = this.peers.get(peer);
      // Read at every renewal: the KeyObject is made again only when the record changed.
      if (known !== undefined && known.text === text) {
        next.set(peer, known);
        continue;
      }
      const parsed = parsePublication(text);
      if (parsed !== null) next.set(peer, { ...parsed, text, newest: hopKeyObject((parsed.keys[0] as HopKey).secret) });
    }
    this.peers = next;
  }

  /** Whether this node can sign a hop to `owner`: it knows keys of the process running it now. */
  canReach(owner: string): boolean {
    const peer = this.peers.get(owner);
    return peer !== undefined && peer.keys.length > 0 && this.processes.get(owner) === peer.process;
  }

  /** The means for a worker to sign one connection's hop of `sessionKey` to `owner` now; null when `owner` cannot be reached. */
  grant(owner: string, sessionKey: string): HopGrant | null {
    if (!this.canReach(owner)) return null;
    const peer = this.peers.get(owner) as Peer;
    const window = hopWindow(this.now());
    return { from: this.node, window, keyId: (peer.keys[0] as HopKey).id, key: sessionHopKey(peer.newest, { from: this.node, to: owner, sessionKey, window }).toString('base64url') };
  }

  private add(): void {
    this.own.unshift({ key: { id: randomBytes(9).toString('base64url'), secret: randomBytes(32).toString('base64url') }, createdAt: this.now() });
    this.own = this.own.slice(0, MAX_KEYS);
    this.version++;
  }

  private changed(): void {
    this.version++;
    const snapshot = this.snapshot();
    for (const listener of this.listeners) listener(snapshot);
  }
}

interface Peer {
  process: string;
  keys: HopKey[];
  /** The record as read (a record read again unchanged is not parsed again). */
  text: string;
  /** The newest key, the one hops are signed with, as a KeyObject. */
  newest: KeyObject;
}

/** A peer's record, every part checked (Redis is read as hostile input); null when it is not one. */
function parsePublication(text: string): { process: string; keys: HopKey[] } | null {
  const [process, ...pairs] = text.split(' ');
  if (process === undefined || !PROCESS.test(process) || pairs.length === 0 || pairs.length > MAX_KEYS) return null;
  const keys: HopKey[] = [];
  for (const pair of pairs) {
    const colon = pair.indexOf(':');
    const id = pair.slice(0, colon);
    const secret = pair.slice(colon + 1);
    if (colon < 0 || !isHopKeyId(id) || !SECRET.test(secret)) return null;
    keys.push({ id, secret });
  }
  return { process, keys };
}
