import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { formatIPv6, parseIPv4, parseIPv6 } from '../../workers/proxy/ip-literal.js';
import { isPrivateDestination } from '../../workers/proxy/private-destination.js';
import { clientIpOf } from '../../shared/net/client-ip.js';

/** WHATWG URL serialisation of IPv6 equals RFC 5952's canonical form, so it serves as an oracle. */
function canonical(text: string): string {
  return new URL(`http://[${text}]/`).hostname.slice(1, -1);
}

describe('proxy: IP literals and private destinations', () => {
  it('parses every IPv6 text form and prints the canonical one', () => {
    fc.assert(
      fc.property(fc.ipV6(), (text) => {
        const bytes = parseIPv6(text);
        expect(bytes, text).to.not.equal(null);
        expect(formatIPv6(bytes!)).to.equal(canonical(text));
      }),
      { numRuns: fuzzRuns(2000) },
    );
  });

  it('formats arbitrary 16-byte addresses canonically and parses them back', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (raw) => {
        const text = formatIPv6(raw);
        expect(text).to.equal(canonical(text));
        expect([...parseIPv6(text)!]).to.deep.equal([...raw]);
      }),
    );
  });

  it('refuses malformed literals', () => {
    for (const bad of ['', ':', ':::', '1::2::3', '1:2:3:4:5:6:7:8:9', '::g', 'fe80::1%eth0', '1:2:3:4:5:6:7', '::1.2.3', '12345::']) {
      expect(parseIPv6(bad), bad).to.equal(null);
    }
    for (const bad of ['1.2.3', '1.2.3.4.5', '256.1.1.1', '01.1.1.1', '1.2.3.-4', 'a.b.c.d', '']) {
      expect(parseIPv4(bad), bad).to.equal(null);
    }
    expect([...parseIPv4('192.168.0.255')!]).to.deep.equal([192, 168, 0, 255]);
  });

  it('classifies private, loopback and special ranges as private', () => {
    const privateHosts = [
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '127.0.0.1',
      '127.255.0.9',
      '169.254.1.1',
      '100.64.0.1',
      '100.127.255.255',
      '0.0.0.0',
      '0.1.2.3',
      '::1',
      '::',
      'fc00::1',
      'fdff::1',
      'fe80::1',
      'febf::1',
      '::ffff:10.0.0.1',
      'localhost',
      'LOCALHOST.',
      'foo.localhost',
    ];
    for (const host of privateHosts) expect(isPrivateDestination(host), host).to.equal(true);
    const publicHosts = ['8.8.8.8', '172.32.0.1', '172.15.255.255', '192.169.0.1', '100.128.0.1', '100.63.255.255', '2001:db8::1', 'fec0::1', '::ffff:8.8.8.8', 'example.com', 'localhost.example.com', 'notlocalhost'];
    for (const host of publicHosts) expect(isPrivateDestination(host), host).to.equal(false);
  });

  it('unwraps IPv4-mapped client addresses for DEFAULT_SESSION=ip', () => {
    expect(clientIpOf('::ffff:127.0.0.1')).to.equal('127.0.0.1');
    expect(clientIpOf('::1')).to.equal('::1');
    expect(clientIpOf(undefined)).to.equal('unknown');
  });
});
