import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { PublicNetworkRefusedError, TorrcOptionError } from '../../supervisor/tor/errors.js';
import { parseNodeList } from '../../supervisor/tor/node-list.js';
import { assertPrivateNetworkTorrc, missingPrivateNetworkMarkers } from '../../supervisor/tor/private-network-guard.js';
import { renderTorrc, type TorrcOptions } from '../../supervisor/tor/torrc.js';

const base: TorrcOptions = {
  dataDirectory: '/var/lib/exitpool/tor/3',
  socks: { kind: 'unix', path: '/var/lib/exitpool/tor/3/socks.sock' },
  control: { kind: 'unix', path: '/var/lib/exitpool/tor/3/control.sock' },
  cookieAuthFile: '/var/lib/exitpool/tor/3/control_auth_cookie',
  owningControllerPid: 4242,
  conflux: false,
  maxCircuitDirtinessSecs: 3600,
};

const PRIVATE_LINES = [
  'TestingTorNetwork 1',
  'UseDefaultFallbackDirs 0',
  'DirAuthority auth1 orport=5001 no-v2 v3ident=AAAA 127.0.0.1:7001 0123456789ABCDEF0123456789ABCDEF01234567',
];

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l !== '');
}

describe('tor torrc rendering', () => {
  it('renders every required option, loopback only', () => {
    const text = renderTorrc(base);
    const ls = lines(text);
    expect(ls).to.include('DataDirectory "/var/lib/exitpool/tor/3"');
    // The SocksPort is a Unix socket in the private data directory, and there is no TCP one.
    expect(ls).to.include('SocksPort unix:"/var/lib/exitpool/tor/3/socks.sock" IPv6Traffic NoIsolateSOCKSAuth');
    expect(ls.filter((l) => l.startsWith('SocksPort'))).to.have.length(1);
    expect(ls).to.include('ControlPort unix:"/var/lib/exitpool/tor/3/control.sock"');
    expect(ls).to.include('CookieAuthentication 1');
    expect(ls).to.include('CookieAuthFile "/var/lib/exitpool/tor/3/control_auth_cookie"');
    expect(ls).to.include('ConfluxEnabled 0');
    expect(ls).to.include('MaxCircuitDirtiness 3600');
    expect(ls).to.include('__OwningControllerProcess 4242');
    expect(ls).to.include('Log notice stdout');
    expect(ls).to.include('RunAsDaemon 0');
    expect(ls).to.include('AvoidDiskWrites 1');
    expect(text.endsWith('\n')).to.equal(true);
    // Never IsolateSOCKSAuth-based splitting, never a non-loopback listener, GeoIP left default.
    expect(text).not.to.match(/\bIsolateSOCKSAuth\b(?<!No)/);
    expect(text).not.to.match(/GeoIP/);
    expect(text).not.to.match(/0\.0\.0\.0/);
    expect(ls.some((l) => l.startsWith('ExitNodes'))).to.equal(false);
    expect(ls.some((l) => l.startsWith('StrictNodes'))).to.equal(false);
  });

  it('uses a TCP SocksPort on 127.0.0.1 (loopback-only policy) when asked', () => {
    const ls = lines(renderTorrc({ ...base, socks: { kind: 'tcp', port: 19053 } }));
    expect(ls).to.include('SocksPort 127.0.0.1:19053 IPv6Traffic NoIsolateSOCKSAuth');
    expect(ls).to.include('SocksPolicy accept 127.0.0.1');
    expect(ls).to.include('SocksPolicy reject *');
  });

  it('uses a TCP control port on 127.0.0.1 when asked', () => {
    const text = renderTorrc({ ...base, control: { kind: 'tcp', port: 9151 } });
    expect(lines(text)).to.include('ControlPort 127.0.0.1:9151');
  });

  it('writes conflux, exit nodes and strict nodes when given', () => {
    const text = renderTorrc({ ...base, conflux: true, exitNodes: parseNodeList('x', '{DE}, {nl}'), strictNodes: true });
    const ls = lines(text);
    expect(ls).to.include('ConfluxEnabled 1');
    expect(ls).to.include('ExitNodes {de},{nl}');
    expect(ls).to.include('StrictNodes 1');
    expect(lines(renderTorrc({ ...base, strictNodes: false }))).to.include('StrictNodes 0');
  });

  it('appends extra lines last so they can override', () => {
    const text = renderTorrc({ ...base, extraLines: ['ConfluxEnabled 1', 'GeoIPFile /tmp/geoip'] });
    const ls = lines(text);
    expect(ls.slice(-2)).to.deep.equal(['ConfluxEnabled 1', 'GeoIPFile /tmp/geoip']);
    expect(ls.indexOf('ConfluxEnabled 0')).to.be.lessThan(ls.indexOf('ConfluxEnabled 1'));
  });

  it('quotes paths so spaces, # and backslashes stay literal', () => {
    const text = renderTorrc({ ...base, dataDirectory: '/tmp/a b#c\\d"e' });
    expect(lines(text)).to.include('DataDirectory "/tmp/a b#c\\\\d\\"e"');
  });

  const invalid: Array<[string, Partial<TorrcOptions>]> = [
    ['socks port 0', { socks: { kind: 'tcp', port: 0 } }],
    ['socks port 65536', { socks: { kind: 'tcp', port: 65536 } }],
    ['socks port not integer', { socks: { kind: 'tcp', port: 80.5 } }],
    ['newline in socks socket path', { socks: { kind: 'unix', path: '/tmp/s\nSocksPort 0.0.0.0:9050' } }],
    ['socks socket path too long', { socks: { kind: 'unix', path: `/${'s'.repeat(120)}` } }],
    ['relative socks socket path', { socks: { kind: 'unix', path: 'socks.sock' } }],
    ['control port 0', { control: { kind: 'tcp', port: 0 } }],
    ['relative data dir', { dataDirectory: 'data/tor/1' }],
    ['empty data dir', { dataDirectory: '' }],
    ['newline in data dir', { dataDirectory: '/tmp/x\nSocksPort 0.0.0.0:9050' }],
    ['CR in cookie path', { cookieAuthFile: '/tmp/c\rookie' }],
    ['NUL in socket path', { control: { kind: 'unix', path: '/tmp/s\u0000ock' } }],
    ['socket path too long', { control: { kind: 'unix', path: '/' + 'x'.repeat(107) } }],
    ['dirtiness 0', { maxCircuitDirtinessSecs: 0 }],
    ['dirtiness fractional', { maxCircuitDirtinessSecs: 1.5 }],
    ['bad pid', { owningControllerPid: 0 }],
    ['injected exit node', { exitNodes: ['{de}\nSocksPort 0.0.0.0:9050'] }],
    ['exit node with space', { exitNodes: ['{de} ExitRelay 1'] }],
    ['extra line with newline', { extraLines: ['Foo 1\nSocksPort 0.0.0.0:9050'] }],
    ['extra line continuation', { extraLines: ['Nickname abc\\'] }],
  ];
  for (const [name, override] of invalid) {
    it(`refuses ${name} with TorrcOptionError`, () => {
      expect(() => renderTorrc({ ...base, ...override })).to.throw(TorrcOptionError);
    });
  }

  it('accepts a socket path of exactly 107 bytes', () => {
    const path = '/' + 'x'.repeat(106);
    expect(() => renderTorrc({ ...base, control: { kind: 'unix', path } })).not.to.throw();
  });

  it('property: no value can inject a line (it is written on one line or refused)', () => {
    const expectedLines = lines(renderTorrc(base)).length;
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.constantFrom('dataDirectory', 'cookieAuthFile', 'socket', 'exitNode', 'extra'),
        (value, where) => {
          let options: TorrcOptions;
          switch (where) {
            case 'dataDirectory':
              options = { ...base, dataDirectory: `/d/${value}` };
              break;
            case 'cookieAuthFile':
              options = { ...base, cookieAuthFile: `/c/${value}` };
              break;
            case 'socket':
              options = { ...base, control: { kind: 'unix', path: `/s/${value}` } };
              break;
            case 'exitNode':
              options = { ...base, exitNodes: [value] };
              break;
            default:
              options = { ...base, extraLines: [value] };
          }
          let text: string;
          try {
            text = renderTorrc(options);
          } catch (error) {
            expect(error).to.be.instanceOf(TorrcOptionError);
            return;
          }
          const rendered = text.split('\n');
          expect(rendered[rendered.length - 1]).to.equal('');
          const extra = where === 'exitNode' || where === 'extra' ? 1 : 0;
          expect(rendered.length - 1).to.equal(expectedLines + extra);
          const controlCharacter = [...text].some((ch) => ch !== '\n' && ch !== '\t' && (ch.charCodeAt(0) < 0x20 || ch === '\u007f'));
          expect(controlCharacter, 'control character in the output').to.equal(false);
        },
      ),
      { numRuns: fuzzRuns(2000) },
    );
  });
});

describe('tor node lists', () => {
  it('normalises country codes, fingerprints, nicknames and addresses', () => {
    expect(parseNodeList('x', '{DE},{nl}')).to.deep.equal(['{de}', '{nl}']);
    expect(parseNodeList('x', ' $' + 'ab'.repeat(20) + '~exit1 ')).to.deep.equal(['$' + 'AB'.repeat(20) + '~exit1']);
    expect(parseNodeList('x', 'ab'.repeat(20))).to.deep.equal(['$' + 'AB'.repeat(20)]);
    expect(parseNodeList('x', 'exit1,127.0.0.0/8,10.1.2.3')).to.deep.equal(['exit1', '127.0.0.0/8', '10.1.2.3']);
    expect(parseNodeList('x', '  ')).to.deep.equal([]);
  });

  for (const bad of ['{deu}', '{d}', '$ABC', 'a-b', '300.1.1.1', '1.2.3.4/33', 'nick name', 'x'.repeat(20), '{de}}']) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      expect(() => parseNodeList('TOR_EXIT_NODES', bad)).to.throw(TorrcOptionError);
    });
  }
});

describe('tor private-network guard', () => {
  it('accepts a torrc with the private-network markers', () => {
    const text = renderTorrc({ ...base, extraLines: PRIVATE_LINES });
    expect(missingPrivateNetworkMarkers(text)).to.deep.equal([]);
    expect(() => assertPrivateNetworkTorrc(text)).not.to.throw();
  });

  it('refuses a default-network torrc and names what is missing', () => {
    const text = renderTorrc(base);
    expect(() => assertPrivateNetworkTorrc(text)).to.throw(PublicNetworkRefusedError);
    expect(missingPrivateNetworkMarkers(text)).to.deep.equal([
      'TestingTorNetwork 1',
      'UseDefaultFallbackDirs 0',
      'DirAuthority on 127.0.0.x',
    ]);
  });

  it('refuses when a later line switches TestingTorNetwork off, or an authority is public', () => {
    const off = renderTorrc({ ...base, extraLines: [...PRIVATE_LINES, 'testingtornetwork 0'] });
    expect(missingPrivateNetworkMarkers(off)).to.deep.equal(['TestingTorNetwork 1']);
    const pub = renderTorrc({
      ...base,
      extraLines: [...PRIVATE_LINES, 'DirAuthority moria1 orport=9101 v3ident=D586 128.31.0.39:9231 9695DFC35FFEB861329B9F1AB04C46397020CE31'],
    });
    expect(missingPrivateNetworkMarkers(pub)).to.deep.equal(['every DirAuthority on 127.0.0.x']);
  });
});
