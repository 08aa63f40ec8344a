import path from 'node:path';
import { InvalidTestnetOptionsError } from './errors.js';

export type NodeRole = 'authority' | 'relay' | 'exit';

/** One tor of the network: where it listens and where its files live. */
export interface NodePlan {
  readonly role: NodeRole;
  readonly index: number;
  readonly nickname: string;
  /** The relay's own loopback address: Address, ORPort, and (through the shim) its source address. */
  readonly address: string;
  readonly orPort: number;
  /**
   * Every node serves a DirPort: authorities for clients' bootstrap, caches so waitUntilUsable()
   * can check they hold every microdescriptor (a client whose first microdescriptor fetch hits
   * a cache that lacks them retries only a voting interval later).
   */
  readonly dirPort: number;
  /** Country the custom GeoIP file gives this relay's address (exits only). */
  readonly country: string | undefined;
  /**
   * Where its exit traffic leaves from: its own address, except for EGRESS_ELSEWHERE_EXITS,
   * whose traffic leaves from an address in another exit's /24 (through the shim).
   */
  readonly egressAddress: string;
  /** Country the GeoIP file gives the egress address (exits only): the host exit's for those exits. */
  readonly egressCountry: string | undefined;
  /** Indices of the other exits this exit declares as its family (MyFamily); empty for most. */
  readonly familyExits: readonly number[];
  readonly dir: string;
}

export interface TestnetPlan {
  readonly basePort: number;
  readonly dnsPort: number;
  readonly whoamiPort: number;
  /** The ORPorts and DirPorts of the network (inclusive): traffic to them is relay traffic, not exit traffic. */
  readonly relayPorts: { readonly low: number; readonly high: number };
  readonly nodes: readonly NodePlan[];
}

export const AUTHORITY_COUNT = 3;
export const MIN_EXITS = 4;
/**
 * Enough for a pool of 40 instances with an exit each (the scale benchmark, bench/pool-scale.ts).
 * The largest network (with MAX_RELAYS) spans two PORT_BLOCK_SIZE blocks; reservePortBlock locks
 * every block a span touches.
 */
export const MAX_EXITS = 40;
export const MAX_RELAYS = 8;
export const DEFAULT_RELAYS = 3;
/**
 * Eight exits: enough for a pool of 4 to get 4 distinct /24s after the shared block and the
 * family below are counted once, and for rotations to avoid a session's last 5 exits.
 */
export const DEFAULT_EXITS = 8;
/** These two exits share one /24 (the exit-distinctness unit `subnet` must keep them apart). */
export const SHARED_BLOCK_EXITS: readonly [number, number] = [0, 1];
/** These two exits declare each other as family (MyFamily): the unit `family` keeps them apart. */
export const FAMILY_EXITS: readonly [number, number] = [2, 3];
/**
 * Exits whose exit traffic leaves from another address than the one they publish, as some
 * exits of the public network do, in a network started with `egressElsewhere`: [exit, host exit]. The exit's traffic leaves from an address
 * in the host exit's /24, which the GeoIP file places in the host's country. Exit 5 (ch,
 * 127.24.0.1) leaves from 127.23.0.6, in exit 4's /24 (us); exit 7 (jp, 127.26.0.1) from
 * 127.21.0.8, in exit 2's (us). So the 8 exits publish 7 /24s but sites see them from 5:
 * 127.20 (exits 0, 1), 127.21 (2, 7), 127.22 (3), 127.23 (4, 5), 127.25 (6). Chosen so that the
 * countries tests rely on keep their exits: de and nl stay the shared pair alone, se and ca keep
 * one exit each, and us gains two.
 */
export const EGRESS_ELSEWHERE_EXITS: readonly (readonly [number, number])[] = [
  [5, 4],
  [7, 2],
];

/**
 * Seven countries; us has two exits in different /24s (exits 2 and 4), so a session that asks
 * for it can rotate, and be moved off a burnt exit, without leaving it. de and nl are the shared
 * /24's pair alone (TOR_EXIT_NODES=de,nl selects exactly them).
 */
export const DEFAULT_EXIT_COUNTRIES: readonly string[] = ['de', 'nl', 'us', 'se', 'us', 'ch', 'ca', 'jp'];

/** Every network owns this many consecutive ports from its base; blocks are this far apart. */
export const PORT_BLOCK_SIZE = 100;
const FIRST_NODE_PORT_OFFSET = 10;

// Authorities share 127.0.0.1 (the DirAuthority address); relays get 127.0.0.2…9. Exits get
// their own /24 each, 127.20.0.1, 127.21.0.1, … (except SHARED_BLOCK_EXITS, which share
// 127.20.0.0/24), so a destination tells exits apart by source address and the pool's
// distinctness by /24 has something to keep apart. Linux routes all of 127/8 to lo.
const AUTHORITY_ADDRESS = '127.0.0.1';
const FIRST_RELAY_HOST = 2;
const FIRST_EXIT_BLOCK = 20;

/** The loopback address of exit `i`: its published OR address and its outgoing source address. */
export function exitAddress(i: number): string {
  const [first, second] = SHARED_BLOCK_EXITS;
  if (i === second) return `127.${FIRST_EXIT_BLOCK + first}.0.2`;
  // Blocks stay consecutive: the exit after the shared pair takes the next /24.
  const block = i > second ? i - 1 : i;
  return `127.${FIRST_EXIT_BLOCK + block}.0.1`;
}

/** Where exit `i`'s traffic leaves from: an address in its host exit's /24 for EGRESS_ELSEWHERE_EXITS (when the network has them), else its own. */
export function exitEgressAddress(i: number, exits: number, egressElsewhere: boolean): string {
  const host = hostExitOf(i, exits, egressElsewhere);
  if (host === undefined) return exitAddress(i);
  const [a, b, c] = exitAddress(host).split('.');
  return `${a}.${b}.${c}.${i + 1}`;
}

/** The exit in whose /24 (and country) exit `i`'s traffic leaves, when it is one of EGRESS_ELSEWHERE_EXITS in a network that has its host. */
function hostExitOf(i: number, exits: number, egressElsewhere: boolean): number | undefined {
  if (!egressElsewhere) return undefined;
  const pair = EGRESS_ELSEWHERE_EXITS.find(([exit, host]) => exit === i && exit < exits && host < exits);
  return pair?.[1];
}

function familyOf(i: number, exits: number): number[] {
  const [a, b] = FAMILY_EXITS;
  if (exits <= Math.max(a, b)) return [];
  if (i === a) return [b];
  if (i === b) return [a];
  return [];
}

export interface TopologyInput {
  readonly basePort: number;
  readonly relays: number;
  readonly exits: number;
  readonly exitCountries: readonly string[];
  /**
   * Whether EGRESS_ELSEWHERE_EXITS leave from another exit's /24. Off by default: most tests
   * count the /24s a pool can keep apart, and two of them fewer leaves too few for a rotation
   * to avoid a session's last five.
   */
  readonly egressElsewhere?: boolean;
  readonly workDir: string;
}

export function validateTopology(input: Omit<TopologyInput, 'workDir'>): void {
  const { basePort, relays, exits, exitCountries } = input;
  if (!Number.isInteger(exits) || exits < MIN_EXITS || exits > MAX_EXITS) {
    throw new InvalidTestnetOptionsError(`exits must be an integer in ${MIN_EXITS}..${MAX_EXITS}, got ${exits}`);
  }
  if (!Number.isInteger(relays) || relays < 1 || relays > MAX_RELAYS) {
    throw new InvalidTestnetOptionsError(`relays must be an integer in 1..${MAX_RELAYS}, got ${relays}`);
  }
  const lastPort = basePort + portSpan(relays, exits) - 1;
  if (!Number.isInteger(basePort) || basePort < 1024 || lastPort > 65535) {
    throw new InvalidTestnetOptionsError(`basePort ${basePort} does not leave room for the network's ports`);
  }
  if (exitCountries.length === 0) throw new InvalidTestnetOptionsError('exitCountries must not be empty');
  for (const cc of exitCountries) {
    if (!/^[a-z]{2}$/i.test(cc)) throw new InvalidTestnetOptionsError(`not a two-letter country code: ${cc}`);
  }
}

/** Number of ports a network with this many relays and exits uses from its base port. */
export function portSpan(relays: number, exits: number): number {
  return FIRST_NODE_PORT_OFFSET + 2 * (AUTHORITY_COUNT + relays + exits);
}

export function planTopology(input: TopologyInput): TestnetPlan {
  validateTopology(input);
  const { basePort, relays, exits, exitCountries, workDir } = input;
  const egressElsewhere = input.egressElsewhere ?? false;
  const nodes: NodePlan[] = [];
  const add = (role: NodeRole, index: number, address: string, country: string | undefined, familyExits: number[] = [], egress = { address, country }): void => {
    const slot = nodes.length;
    const nickname = `tn${role === 'authority' ? 'auth' : role}${index}`;
    nodes.push({
      role,
      index,
      nickname,
      address,
      orPort: basePort + FIRST_NODE_PORT_OFFSET + 2 * slot,
      dirPort: basePort + FIRST_NODE_PORT_OFFSET + 2 * slot + 1,
      country,
      egressAddress: egress.address,
      egressCountry: egress.country,
      familyExits,
      dir: path.join(workDir, nickname),
    });
  };
  for (let i = 0; i < AUTHORITY_COUNT; i++) add('authority', i, AUTHORITY_ADDRESS, undefined);
  for (let i = 0; i < relays; i++) add('relay', i, `127.0.0.${FIRST_RELAY_HOST + i}`, undefined);
  const countryOf = (i: number): string => (exitCountries[i % exitCountries.length] ?? 'de').toLowerCase();
  for (let i = 0; i < exits; i++) {
    const host = hostExitOf(i, exits, egressElsewhere);
    add('exit', i, exitAddress(i), countryOf(i), familyOf(i, exits), { address: exitEgressAddress(i, exits, egressElsewhere), country: countryOf(host ?? i) });
  }
  const relayPorts = { low: basePort + FIRST_NODE_PORT_OFFSET, high: basePort + portSpan(relays, exits) - 1 };
  return { basePort, dnsPort: basePort, whoamiPort: basePort + 1, relayPorts, nodes };
}

export interface PlannedEndpoint {
  readonly address: string;
  readonly port: number;
  readonly protocol: 'tcp' | 'udp';
}

/** Every socket the network will listen on, so they can be checked before anything starts. */
export function plannedEndpoints(plan: TestnetPlan): PlannedEndpoint[] {
  const endpoints: PlannedEndpoint[] = [
    { address: '127.0.0.1', port: plan.dnsPort, protocol: 'udp' },
    { address: '127.0.0.1', port: plan.whoamiPort, protocol: 'tcp' },
  ];
  for (const node of plan.nodes) {
    endpoints.push({ address: node.address, port: node.orPort, protocol: 'tcp' });
    endpoints.push({ address: node.address, port: node.dirPort, protocol: 'tcp' });
  }
  return endpoints;
}
