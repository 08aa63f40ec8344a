import path from 'node:path';
import type { NodePlan } from './topology.js';

/** What a DirAuthority line needs to know about one authority. */
export interface AuthorityIdentity {
  readonly nickname: string;
  readonly address: string;
  readonly orPort: number;
  readonly dirPort: number;
  /** SHA-1 of the authority identity key (tor-gencert's certificate `fingerprint`). */
  readonly v3Identity: string;
  /** SHA-1 of the relay identity key (tor --list-fingerprint). */
  readonly fingerprint: string;
}

/** Files shared by every tor of one network. */
export interface SharedFiles {
  readonly geoipFile: string;
  readonly geoip6File: string;
  readonly resolvConfFile: string;
  readonly bandwidthFile: string;
}

/** Paths with spaces or quotes need tor's quoted-string syntax. */
export function torrcValue(value: string): string {
  return /[\s"\\#]/.test(value) ? JSON.stringify(value) : value;
}

export function dirAuthorityLine(a: AuthorityIdentity): string {
  return `DirAuthority ${a.nickname} orport=${a.orPort} no-v2 v3ident=${a.v3Identity} ${a.address}:${a.dirPort} ${a.fingerprint}`;
}

/**
 * The lines every tor that joins the network needs, relays and clients alike: without
 * TestingTorNetwork, DirAuthority and UseDefaultFallbackDirs 0 a tor would contact the public
 * network. The custom GeoIP files give loopback exits their countries.
 */
export function networkMembershipLines(authorities: readonly AuthorityIdentity[], files: Pick<SharedFiles, 'geoipFile' | 'geoip6File'>): string[] {
  return [
    'TestingTorNetwork 1',
    'UseDefaultFallbackDirs 0',
    ...authorities.map(dirAuthorityLine),
    `GeoIPFile ${torrcValue(files.geoipFile)}`,
    `GeoIPv6File ${torrcValue(files.geoip6File)}`,
    // A handful of relays is a tiny network: the default fraction would wait for descriptors.
    'PathsNeededToBuildCircuits 0.25',
  ];
}

export interface NodeTorrcInput {
  readonly node: NodePlan;
  readonly authorities: readonly AuthorityIdentity[];
  readonly files: SharedFiles;
  readonly exitFingerprints: readonly string[];
  readonly guardFingerprints: readonly string[];
  /** Fingerprints this node declares as its family (MyFamily); each member declares this one too. */
  readonly familyFingerprints?: readonly string[];
  /** tor exits on its own when this process dies: the safety net if Node is killed. */
  readonly owningPid: number;
}

export function nodeDataDirectory(node: NodePlan): string {
  return path.join(node.dir, 'data');
}

export function nodeTorrcPath(node: NodePlan): string {
  return path.join(node.dir, 'torrc');
}

export function nodePidFile(node: NodePlan): string {
  return path.join(node.dir, 'tor.pid');
}

export function nodeLogFile(node: NodePlan): string {
  return path.join(node.dir, 'notice.log');
}

function routerset(fingerprints: readonly string[]): string {
  return fingerprints.map((fp) => `$${fp}`).join(',');
}

/**
 * Directory caches fetch each new consensus (and its new microdescriptors) as soon as the
 * authorities publish it, instead of at a random later point of the interval: a client's first
 * microdescriptor fetch from a cache that lags gets a 404 and is retried a voting interval later.
 */
const CACHE_EARLY_FETCH_LINES = ['FetchDirInfoEarly 1', 'FetchDirInfoExtraEarly 1'];

/**
 * How long an exit waits for the network's DNS responder (consensus parameter
 * `exit_dns_timeout`, tor's default 1,000 ms): far above what the responder takes when its event
 * loop is free, so that only a responder that is gone times out.
 */
export const EXIT_DNS_TIMEOUT_MS = 10_000;

export function nodeTorrcLines(input: NodeTorrcInput): string[] {
  const { node, files } = input;
  const lines = [
    `# exitpool private test network: ${node.role} ${node.nickname}. Loopback only.`,
    ...networkMembershipLines(input.authorities, files),
    `Nickname ${node.nickname}`,
    `DataDirectory ${torrcValue(nodeDataDirectory(node))}`,
    `PidFile ${torrcValue(nodePidFile(node))}`,
    `Log notice file ${torrcValue(nodeLogFile(node))}`,
    'SafeLogging 0',
    'ContactInfo exitpool-testnet',
    `Address ${node.address}`,
    `ORPort ${node.address}:${node.orPort}`,
    `DirPort ${node.address}:${node.dirPort}`,
    'SocksPort 0',
    'AssumeReachable 1',
    'ShutdownWaitLength 0',
    `__OwningControllerProcess ${input.owningPid}`,
    // The host's resolv.conf names a non-loopback server: exits use the network's own responder.
    `ServerDNSResolvConfFile ${torrcValue(files.resolvConfFile)}`,
    'ServerDNSDetectHijacking 0',
    'ServerDNSAllowBrokenConfig 1',
  ];
  if (node.role === 'authority') {
    lines.push(
      'AuthoritativeDirectory 1',
      'V3AuthoritativeDirectory 1',
      'TestingV3AuthInitialVotingInterval 5',
      'V3AuthVotingInterval 10',
      'TestingV3AuthInitialVoteDelay 2',
      'TestingV3AuthInitialDistDelay 2',
      'V3AuthVoteDelay 2',
      'V3AuthDistDelay 2',
      'V3AuthNIntervalsValid 2',
      `TestingDirAuthVoteExit ${routerset(input.exitFingerprints)}`,
      `TestingDirAuthVoteGuard ${routerset(input.guardFingerprints)}`,
      // Exits must never be guards: a client whose guard is also its exit cannot use it.
      'TestingDirAuthVoteGuardIsStrict 1',
      'TestingMinExitFlagThreshold 0',
      // Conflux legs and long-lived streams need Stable exits; freshly started relays are not.
      'AuthDirFastGuarantee 1 byte',
      'AuthDirVoteStableGuaranteeMinUptime 0',
      'AuthDirVoteStableGuaranteeMTBF 0',
      `V3BandwidthsFile ${torrcValue(files.bandwidthFile)}`,
      // The responder shares an event loop with the test that started the network; a burst of
      // client spawns can hold it past tor's 1 s exit DNS timeout, and a timed-out nameserver is
      // then marked down, failing every resolve on that exit for seconds (SOCKS reply 4).
      `ConsensusParams exit_dns_timeout=${EXIT_DNS_TIMEOUT_MS}`,
      'ExitRelay 0',
      'ExitPolicy reject *:*',
    );
  } else if (node.role === 'relay') {
    lines.push(...CACHE_EARLY_FETCH_LINES, 'ExitRelay 0', 'ExitPolicy reject *:*');
  } else {
    lines.push(...CACHE_EARLY_FETCH_LINES);
    // Safe only because the shim refuses every non-loopback destination before the syscall.
    lines.push('ExitRelay 1', 'ExitPolicy accept *:*', 'ExitPolicyRejectPrivate 0', 'ExitPolicyRejectLocalInterfaces 0', 'IPv6Exit 0');
  }
  const family = input.familyFingerprints ?? [];
  if (family.length > 0) lines.push(`MyFamily ${family.map((f) => `$${f.toUpperCase()}`).join(',')}`);
  return lines;
}

/**
 * A throwaway configuration for `tor --list-fingerprint`: it creates the relay identity keys in
 * the node's real DataDirectory (so the running tor keeps that fingerprint) without opening any
 * socket. TestingTorNetwork refuses to start without custom authorities, hence a placeholder.
 */
export function fingerprintProbeLines(node: NodePlan): string[] {
  const placeholder = 'F'.repeat(40);
  return [
    `# exitpool private test network: key generation for ${node.nickname}. Loopback only.`,
    'TestingTorNetwork 1',
    'UseDefaultFallbackDirs 0',
    `DirAuthority placeholder orport=1 no-v2 v3ident=${placeholder} 127.0.0.1:1 ${placeholder}`,
    'DisableNetwork 1',
    `Nickname ${node.nickname}`,
    `DataDirectory ${torrcValue(nodeDataDirectory(node))}`,
    `Address ${node.address}`,
    `ORPort ${node.address}:${node.orPort}`,
    `DirPort ${node.address}:${node.dirPort}`,
    'SocksPort 0',
    'Log warn stderr',
  ];
}

export function renderTorrc(lines: readonly string[]): string {
  return lines.join('\n') + '\n';
}
