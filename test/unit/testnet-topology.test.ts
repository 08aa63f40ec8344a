import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { InvalidTestnetOptionsError } from '../../internal/testnet/errors.js';
import {
  DEFAULT_EXIT_COUNTRIES,
  DEFAULT_EXITS,
  EGRESS_ELSEWHERE_EXITS,
  exitAddress,
  FAMILY_EXITS,
  MAX_EXITS,
  MAX_RELAYS,
  MIN_EXITS,
  planTopology,
  plannedEndpoints,
  portSpan,
  PORT_BLOCK_SIZE,
  SHARED_BLOCK_EXITS,
  type NodePlan,
} from '../../internal/testnet/topology.js';
import { EXIT_DNS_TIMEOUT_MS, networkMembershipLines, nodeTorrcLines, torrcValue, type AuthorityIdentity, type SharedFiles } from '../../internal/testnet/torrc.js';

const files: SharedFiles = { geoipFile: '/w/geoip', geoip6File: '/w/geoip6', resolvConfFile: '/w/resolv.conf', bandwidthFile: '/w/bandwidth' };
const fp = (c: string): string => c.repeat(40);
const authorities: AuthorityIdentity[] = [0, 1, 2].map((i) => ({
  nickname: `tnauth${i}`,
  address: '127.0.0.1',
  orPort: 20010 + 2 * i,
  dirPort: 20011 + 2 * i,
  v3Identity: fp(String(i)),
  fingerprint: fp(String(i + 3)),
}));

describe('testnet topology and torrc', () => {
  const plan = planTopology({ basePort: 20000, relays: 3, exits: 4, exitCountries: ['de', 'NL', 'us', 'se'], workDir: '/w' });

  it('plans 3 authorities, the relays and the exits, exits in their own /24s (but one shared pair) with their countries', () => {
    expect(plan.nodes.map((n) => n.role)).to.deep.equal(['authority', 'authority', 'authority', 'relay', 'relay', 'relay', 'exit', 'exit', 'exit', 'exit']);
    const exits = plan.nodes.filter((n) => n.role === 'exit');
    expect(exits.map((e) => e.address)).to.deep.equal(['127.20.0.1', '127.20.0.2', '127.21.0.1', '127.22.0.1']);
    expect(exits.map((e) => e.familyExits)).to.deep.equal([[], [], [3], [2]]);
    expect(exits.map((e) => e.country)).to.deep.equal(['de', 'nl', 'us', 'se']);
    expect(plan.nodes.every((n) => n.dirPort === n.orPort + 1), 'every node serves a DirPort').to.equal(true);
    expect(plan.dnsPort).to.equal(20000);
    expect(plan.whoamiPort).to.equal(20001);
  });

  it('keeps every port unique and inside its span of at most two blocks, for any size (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_RELAYS }), fc.integer({ min: MIN_EXITS, max: MAX_EXITS }), fc.integer({ min: 100, max: 600 }), (relays, exits, block) => {
        const basePort = block * PORT_BLOCK_SIZE;
        const p = planTopology({ basePort, relays, exits, exitCountries: ['de'], workDir: '/w' });
        const endpoints = plannedEndpoints(p);
        const ports = endpoints.map((e) => e.port);
        const addresses = new Set(p.nodes.filter((n) => n.role !== 'authority').map((n) => n.address));
        return (
          new Set(ports).size === ports.length &&
          ports.every((port) => port >= basePort && port < basePort + portSpan(relays, exits)) &&
          portSpan(relays, exits) <= 2 * PORT_BLOCK_SIZE &&
          addresses.size === relays + exits
        );
      }),
    );
  });

  it('gives the default network 8 exits in 7 /24s, one shared /24, one declared family and at least 3 countries', () => {
    const big = planTopology({ basePort: 20000, relays: 3, exits: DEFAULT_EXITS, exitCountries: DEFAULT_EXIT_COUNTRIES, workDir: '/w' });
    const exits = big.nodes.filter((n) => n.role === 'exit');
    expect(exits).to.have.length.of.at.least(8);
    const blocks = exits.map((e) => e.address.split('.').slice(0, 3).join('.'));
    expect(new Set(blocks).size).to.equal(exits.length - 1);
    expect(blocks[SHARED_BLOCK_EXITS[0]]).to.equal(blocks[SHARED_BLOCK_EXITS[1]]);
    expect(exits[FAMILY_EXITS[0]]?.familyExits).to.deep.equal([FAMILY_EXITS[1]]);
    expect(new Set(exits.map((e) => e.country)).size).to.be.at.least(3);
    const lines = nodeTorrcLines({ node: exits[FAMILY_EXITS[0]] as NodePlan, authorities, files, exitFingerprints: [], guardFingerprints: [], familyFingerprints: [fp('f')], owningPid: 1 });
    expect(lines).to.include(`MyFamily $${fp('F')}`);
  });

  it('with egressElsewhere, sends the traffic of two exits from an address in another exit\'s /24 and country: 7 published /24s, 5 seen by destinations', () => {
    const big = planTopology({ basePort: 20000, relays: 3, exits: DEFAULT_EXITS, exitCountries: DEFAULT_EXIT_COUNTRIES, egressElsewhere: true, workDir: '/w' });
    const exits = big.nodes.filter((n) => n.role === 'exit');
    const block = (a: string): string => a.split('.').slice(0, 3).join('.');
    for (const [i, host] of EGRESS_ELSEWHERE_EXITS) {
      const exit = exits[i] as NodePlan;
      const hostExit = exits[host] as NodePlan;
      expect(exit.egressAddress, exit.nickname).to.not.equal(exit.address);
      expect(block(exit.egressAddress), exit.nickname).to.equal(block(hostExit.address));
      expect(exit.egressAddress, 'not the host exit itself').to.not.equal(hostExit.address);
      expect(exit.egressCountry).to.equal(hostExit.country);
      expect(exit.country, 'its published address keeps its own country').to.not.equal(hostExit.country);
    }
    const others = exits.filter((e) => !EGRESS_ELSEWHERE_EXITS.some(([i]) => exits[i] === e));
    for (const e of others) expect([e.egressAddress, e.egressCountry]).to.deep.equal([e.address, e.country]);
    expect(new Set(exits.map((e) => block(e.address))).size).to.equal(7);
    expect(new Set(exits.map((e) => block(e.egressAddress))).size).to.equal(5);
    expect(new Set(exits.map((e) => e.egressAddress)).size, 'every egress address its own').to.equal(exits.length);
    // A small network has no host for them, and without the option none does: every exit leaves from its own address.
    for (const e of plan.nodes.filter((n) => n.role === 'exit')) expect(e.egressAddress).to.equal(e.address);
    const plain = planTopology({ basePort: 20000, relays: 3, exits: DEFAULT_EXITS, exitCountries: DEFAULT_EXIT_COUNTRIES, workDir: '/w' });
    for (const e of plain.nodes.filter((n) => n.role === 'exit')) expect([e.egressAddress, e.egressCountry]).to.deep.equal([e.address, e.country]);
    expect(big.relayPorts).to.deep.equal({ low: 20010, high: 20000 + portSpan(3, DEFAULT_EXITS) - 1 });
    const ports = plannedEndpoints(big).filter((e) => e.protocol === 'tcp' && e.port !== big.whoamiPort).map((e) => e.port);
    expect(ports.every((p) => p >= big.relayPorts.low && p <= big.relayPorts.high), 'every ORPort and DirPort is a relay port').to.equal(true);
    expect(big.whoamiPort, 'the destination is not').to.be.below(big.relayPorts.low);
  });

  it('gives every exit a distinct address in 127/8 for any size (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: MIN_EXITS, max: MAX_EXITS }), (exits) => {
        const addresses = Array.from({ length: exits }, (_, i) => exitAddress(i));
        return new Set(addresses).size === exits && addresses.every((a) => /^127\.\d{1,3}\.0\.[12]$/.test(a) && Number(a.split('.')[1]) < 256);
      }),
    );
  });

  it('rejects fewer than four exits, bad country codes and ports that do not fit', () => {
    const base = { basePort: 20000, relays: 2, exitCountries: ['de'], workDir: '/w' };
    expect(() => planTopology({ ...base, exits: 3 })).to.throw(InvalidTestnetOptionsError);
    expect(() => planTopology({ ...base, exits: 4, exitCountries: ['deu'] })).to.throw(InvalidTestnetOptionsError);
    expect(() => planTopology({ ...base, exits: 4, basePort: 65520 })).to.throw(InvalidTestnetOptionsError);
    expect(() => planTopology({ ...base, exits: 4, relays: 0 })).to.throw(InvalidTestnetOptionsError);
  });

  it('writes torrcs that can only join the private network, for every role', () => {
    for (const node of plan.nodes) {
      const lines = nodeTorrcLines({ node, authorities, files, exitFingerprints: [fp('E')], guardFingerprints: [fp('G')], owningPid: 4242 });
      expect(lines, node.nickname).to.include.members([
        'TestingTorNetwork 1',
        'UseDefaultFallbackDirs 0',
        'ShutdownWaitLength 0',
        'SocksPort 0',
        'AssumeReachable 1',
        '__OwningControllerProcess 4242',
        'ServerDNSResolvConfFile /w/resolv.conf',
        'ServerDNSDetectHijacking 0',
        'ServerDNSAllowBrokenConfig 1',
        'GeoIPFile /w/geoip',
        `Address ${node.address}`,
        `ORPort ${node.address}:${node.orPort}`,
        `DirPort ${node.address}:${node.dirPort}`,
        `PidFile ${node.dir}/tor.pid`,
      ]);
      const dirAuthorities = lines.filter((l) => l.startsWith('DirAuthority '));
      expect(dirAuthorities).to.have.length(3);
      for (const line of dirAuthorities) expect(line).to.match(/ 127\.0\.0\.\d+:\d+ [0-9A-F]{40}$/);
      expect(lines.some((l) => /^RunAsDaemon\s+1/.test(l)), 'foreground only').to.equal(false);
    }
    const [authority] = plan.nodes;
    if (!authority) throw new Error('no authority');
    const authLines = nodeTorrcLines({ node: authority, authorities, files, exitFingerprints: [fp('E'), fp('F')], guardFingerprints: [fp('G')], owningPid: 1 });
    expect(authLines).to.include.members([
      'V3AuthoritativeDirectory 1',
      'V3AuthVotingInterval 10',
      `TestingDirAuthVoteExit $${fp('E')},$${fp('F')}`,
      `TestingDirAuthVoteGuard $${fp('G')}`,
      'TestingDirAuthVoteGuardIsStrict 1',
      'AuthDirFastGuarantee 1 byte',
      'AuthDirVoteStableGuaranteeMinUptime 0',
      'AuthDirVoteStableGuaranteeMTBF 0',
      'V3BandwidthsFile /w/bandwidth',
      `ConsensusParams exit_dns_timeout=${EXIT_DNS_TIMEOUT_MS}`,
      'ExitPolicy reject *:*',
    ]);
    const exit = plan.nodes.find((n) => n.role === 'exit');
    if (!exit) throw new Error('no exit');
    expect(nodeTorrcLines({ node: exit, authorities, files, exitFingerprints: [], guardFingerprints: [], owningPid: 1 })).to.include.members([
      'ExitRelay 1',
      'ExitPolicy accept *:*',
      'ExitPolicyRejectPrivate 0',
      'FetchDirInfoExtraEarly 1',
    ]);
  });

  it('gives clients the membership lines only (no ports, no data directory)', () => {
    const lines = networkMembershipLines(authorities, files);
    expect(lines.slice(0, 2)).to.deep.equal(['TestingTorNetwork 1', 'UseDefaultFallbackDirs 0']);
    expect(lines.filter((l) => l.startsWith('DirAuthority '))).to.have.length(3);
    expect(lines.some((l) => /^(SocksPort|ControlPort|DataDirectory|ORPort)\b/.test(l))).to.equal(false);
  });

  it('quotes torrc values with spaces or quotes', () => {
    expect(torrcValue('/plain/path')).to.equal('/plain/path');
    expect(torrcValue('/with space/p')).to.equal('"/with space/p"');
    expect(torrcValue('/q"uote')).to.equal('"/q\\"uote"');
  });
});
