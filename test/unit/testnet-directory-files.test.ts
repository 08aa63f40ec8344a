import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { bandwidthFileContent } from '../../internal/testnet/bandwidth-file.js';
import { countMicrodescriptors, parseConsensus, usabilityProblems } from '../../internal/testnet/consensus.js';
import { InvalidTestnetOptionsError } from '../../internal/testnet/errors.js';
import { geoip6FileContent, geoipFileContent, ipv4ToInteger } from '../../internal/testnet/geoip-file.js';

const MICRODESC_CONSENSUS = `network-status-version 3 microdesc
vote-status consensus
consensus-method 35
valid-after 2026-11-22 05:45:40
fresh-until 2026-11-22 05:45:50
r tnauth0 DRRCGxd4Wpbqs9u374XLspaDGMc 2038-01-01 00:00:00 127.0.0.1 20010 20011
m 8yBYwu/1Mix4eDQvlFqaVSCQ6DJ7U2tlcsl8ie/XxKs
s Authority Fast HSDir Running Stable V2Dir Valid
v Tor 0.4.9.11
w Bandwidth=0 Unmeasured=1
r tnexit3 HkRnBNhAUpPb08o2r4u06zrLU64 2038-01-01 00:00:00 127.0.0.14 20028 0
s Exit Fast HSDir Running Stable V2Dir Valid
w Bandwidth=1000
r tnrelay0 MuurlHTQAWrR3jwJK3sF9Vnmfug 2038-01-01 00:00:00 127.0.0.2 20016 0
s Fast HSDir Running V2Dir Valid
w Bandwidth=1000
directory-footer
bandwidth-weights Wbd=0
`;

describe('testnet directory files (GeoIP, bandwidth, consensus)', () => {
  it('writes GeoIP lines in the INTIPLOW,INTIPHIGH,CC format tor reads, sorted by address', () => {
    expect(ipv4ToInteger('127.0.0.11')).to.equal(2130706443);
    expect(ipv4ToInteger('0.0.0.0')).to.equal(0);
    expect(ipv4ToInteger('255.255.255.255')).to.equal(4294967295);
    const content = geoipFileContent([
      { address: '127.0.0.12', country: 'nl' },
      { address: '127.0.0.11', country: 'de' },
    ]);
    const data = content.split('\n').filter((l) => l && !l.startsWith('#'));
    expect(data).to.deep.equal(['2130706443,2130706443,DE', '2130706444,2130706444,NL']);
    expect(() => geoipFileContent([{ address: '127.0.0.1', country: 'deu' }])).to.throw(InvalidTestnetOptionsError);
    expect(() => geoipFileContent([{ address: '::1', country: 'de' }])).to.throw(InvalidTestnetOptionsError);
    expect(geoip6FileContent().split('\n').filter((l) => l && !l.startsWith('#'))).to.deep.equal([]);
  });

  it('round-trips any IPv4 address through its integer (property)', () => {
    fc.assert(
      fc.property(fc.ipV4(), (address) => {
        const n = ipv4ToInteger(address);
        const back = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
        return back === address.split('.').map(Number).join('.');
      }),
    );
  });

  it('gives every relay the same measured bandwidth with a current timestamp', () => {
    const text = bandwidthFileContent(['ab'.repeat(20), 'CD'.repeat(20)], new Date('2026-01-01T00:00:00Z'));
    expect(text.split('\n')).to.deep.equal(['1767225600', `node_id=$${'AB'.repeat(20)} bw=1000`, `node_id=$${'CD'.repeat(20)} bw=1000`, '']);
  });

  it('parses router entries of a microdescriptor consensus', () => {
    const consensus = parseConsensus(MICRODESC_CONSENSUS);
    expect(consensus.validAfter?.toISOString()).to.equal('2026-11-22T05:45:40.000Z');
    expect(consensus.routers.map((r) => [r.nickname, r.address, r.orPort, r.bandwidth])).to.deep.equal([
      ['tnauth0', '127.0.0.1', 20010, 0],
      ['tnexit3', '127.0.0.14', 20028, 1000],
      ['tnrelay0', '127.0.0.2', 20016, 1000],
    ]);
    expect(consensus.routers[1]?.fingerprint).to.equal('1E446704D8405293DBD3CA36AF8BB4EB3ACB53AE');
    expect([...(consensus.routers[1]?.flags ?? [])]).to.include.members(['Exit', 'Running', 'Stable', 'Fast']);
    expect(consensus.routers.map((r) => r.microdescDigest)).to.deep.equal(['8yBYwu/1Mix4eDQvlFqaVSCQ6DJ7U2tlcsl8ie/XxKs', undefined, undefined]);
  });

  it('counts the microdescriptors in a cache answer', () => {
    const one = 'onion-key\n-----BEGIN RSA PUBLIC KEY-----\nAAAA\n-----END RSA PUBLIC KEY-----\nntor-onion-key x\nid ed25519 y\n';
    expect(countMicrodescriptors(one + one + one)).to.equal(3);
    expect(countMicrodescriptors('')).to.equal(0);
  });

  it('parses the nine-field r line of a full consensus', () => {
    const full = parseConsensus('r tnexit0 XNo4mw8TDJLb9uAtz6nO/tnmohk digestdigestdigestdigestdig 2038-01-01 00:00:00 127.0.0.11 20022 0\ns Exit Running\n');
    expect(full.routers[0]).to.deep.include({ nickname: 'tnexit0', address: '127.0.0.11', orPort: 20022 });
  });

  it('names what keeps the network from being usable', () => {
    const consensus = parseConsensus(MICRODESC_CONSENSUS);
    const problems = usabilityProblems(consensus, {
      required: [
        { nickname: 'tnexit3', fingerprint: '1E446704D8405293DBD3CA36AF8BB4EB3ACB53AE', flags: ['Running', 'Exit', 'Stable'] },
        { nickname: 'tnrelay0', fingerprint: consensus.routers[2]?.fingerprint ?? '', flags: ['Running', 'Stable', 'Guard'] },
        { nickname: 'tnexit9', fingerprint: 'F'.repeat(40), flags: ['Running'] },
      ],
    });
    expect(problems).to.deep.equal(['tnrelay0 lacks Stable,Guard', 'tnexit9 not listed']);
  });
});
