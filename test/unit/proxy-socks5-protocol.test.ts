import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import {
  AuthMethod,
  ReplyCode,
  Socks5ProtocolError,
  encodeGreeting,
  encodeReply,
  encodeRequest,
  encodeUserPasswordRequest,
  parseGreeting,
  parseMethodSelection,
  parseReply,
  parseRequest,
  parseUserPasswordReply,
  parseUserPasswordRequest,
  targetFromHost,
  type ParseOutcome,
  type Socks5Command,
  type Socks5Target,
} from '../../workers/proxy/socks5-protocol.js';

const bytes = (...values: number[]): Buffer => Buffer.from(values);

function ok<T>(outcome: ParseOutcome<T>): { value: T; consumed: number } {
  if (outcome.status !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function errorOf<T>(outcome: ParseOutcome<T>): Socks5ProtocolError {
  if (outcome.status !== 'error') throw new Error(`expected error, got ${outcome.status}`);
  return outcome.error;
}

// Generators ------------------------------------------------------------------------------------

const portArb = fc.integer({ min: 0, max: 65535 });
const domainCharArb = fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c));
const domainArb = fc.array(domainCharArb, { minLength: 1, maxLength: 255 }).map((chars) => chars.join(''));
/** Canonical IPv6 text, as the parser produces it (WHATWG serialisation equals RFC 5952). */
const ipv6Arb = fc.ipV6().map((text) => new URL(`http://[${text}]/`).hostname.slice(1, -1));
const targetArb: fc.Arbitrary<Socks5Target> = fc.oneof(
  fc.record({ type: fc.constant('ipv4' as const), host: fc.ipV4(), port: portArb }),
  fc.record({ type: fc.constant('ipv6' as const), host: ipv6Arb, port: portArb }),
  fc.record({ type: fc.constant('domain' as const), host: domainArb, port: portArb }),
);
const commandArb = fc.constantFrom<Socks5Command>('connect', 'bind', 'udp-associate');
/** Strings whose UTF-8 encoding fits the 255-byte RFC 1929 fields. */
const credentialArb = fc.string({ unit: 'grapheme', maxLength: 60 }).filter((s) => Buffer.byteLength(s, 'utf8') <= 255);

const parsers: Array<[string, (buf: Buffer) => ParseOutcome<unknown>]> = [
  ['parseGreeting', parseGreeting],
  ['parseUserPasswordRequest', parseUserPasswordRequest],
  ['parseRequest', parseRequest],
  ['parseMethodSelection', parseMethodSelection],
  ['parseUserPasswordReply', parseUserPasswordReply],
  ['parseReply', parseReply],
];

describe('proxy: SOCKS5 wire format', () => {
  describe('examples', () => {
    it('parses a greeting and reports how many bytes it used', () => {
      const parsed = ok(parseGreeting(bytes(5, 2, 0, 2, 0xaa)));
      expect(parsed.value.methods).to.deep.equal([0, 2]);
      expect(parsed.consumed).to.equal(4);
    });

    it('refuses a SOCKS4 or HTTP greeting without a reply', () => {
      for (const first of [4, 0x43]) {
        const error = errorOf(parseGreeting(bytes(first, 1, 0)));
        expect(error.code).to.equal('unsupported-version');
        expect(error.replyCode).to.equal(null);
      }
    });

    it('parses RFC 1929 username and password as UTF-8', () => {
      const parsed = ok(parseUserPasswordRequest(encodeUserPasswordRequest('sessión', 'tp_abc')));
      expect(parsed.value).to.deep.equal({ username: 'sessión', password: 'tp_abc' });
    });

    it('parses CONNECT to IPv4, IPv6 and domain targets, keeping the domain unresolved', () => {
      expect(ok(parseRequest(bytes(5, 1, 0, 1, 10, 0, 0, 1, 0x01, 0xbb))).value).to.deep.equal({
        command: 'connect',
        target: { type: 'ipv4', host: '10.0.0.1', port: 443 },
      });
      const v6 = Buffer.concat([bytes(5, 1, 0, 4), Buffer.alloc(15), bytes(1, 0, 80)]);
      expect(ok(parseRequest(v6)).value.target).to.deep.equal({ type: 'ipv6', host: '::1', port: 80 });
      const name = Buffer.from('example.onion', 'latin1');
      const domain = Buffer.concat([bytes(5, 1, 0, 3, name.length), name, bytes(0, 80)]);
      expect(ok(parseRequest(domain)).value.target).to.deep.equal({ type: 'domain', host: 'example.onion', port: 80 });
    });

    it('parses BIND and UDP ASSOCIATE (the listener answers them with reply 7)', () => {
      expect(ok(parseRequest(bytes(5, 2, 0, 1, 1, 2, 3, 4, 0, 1))).value.command).to.equal('bind');
      expect(ok(parseRequest(bytes(5, 3, 0, 1, 1, 2, 3, 4, 0, 1))).value.command).to.equal('udp-associate');
    });

    it('maps malformed requests to precise reply codes', () => {
      const cases: Array<[Buffer, string, number | null]> = [
        [bytes(5, 9, 0, 1, 1, 2, 3, 4, 0, 1), 'unsupported-command', ReplyCode.CommandNotSupported],
        [bytes(5, 0xf0, 0, 3, 1, 0x61, 0, 1), 'unsupported-command', ReplyCode.CommandNotSupported],
        [bytes(5, 1, 0, 2, 1, 2, 3, 4, 0, 1), 'unsupported-address-type', ReplyCode.AddressTypeNotSupported],
        [bytes(5, 1, 1, 1, 1, 2, 3, 4, 0, 1), 'reserved-not-zero', ReplyCode.GeneralFailure],
        [bytes(5, 1, 0, 3, 0, 0, 80), 'invalid-domain', ReplyCode.GeneralFailure],
        [bytes(5, 1, 0, 3, 3, 0x61, 0x20, 0x62, 0, 80), 'invalid-domain', ReplyCode.GeneralFailure],
        [bytes(4, 1, 0, 1, 1, 2, 3, 4, 0, 1), 'unsupported-version', ReplyCode.GeneralFailure],
      ];
      for (const [input, code, reply] of cases) {
        const error = errorOf(parseRequest(input));
        expect(error, input.toString('hex')).to.be.instanceOf(Socks5ProtocolError);
        expect(error.code).to.equal(code);
        expect(error.replyCode).to.equal(reply);
      }
    });

    it('encodes full replies: 10 bytes for the default bound address, never the 2-byte shortcut', () => {
      expect([...encodeReply(ReplyCode.CommandNotSupported)]).to.deep.equal([5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
      expect(encodeReply(ReplyCode.GeneralFailure)).to.have.length(10);
      expect(encodeReply(0, { type: 'ipv6', host: '::1', port: 1 })).to.have.length(22);
    });

    it('builds targets from text: IP literals become address types, names stay names', () => {
      expect(targetFromHost('127.0.0.1', 80)).to.deep.equal({ type: 'ipv4', host: '127.0.0.1', port: 80 });
      expect(targetFromHost('0:0::1', 80)).to.deep.equal({ type: 'ipv6', host: '::1', port: 80 });
      expect(targetFromHost('localhost', 80)).to.deep.equal({ type: 'domain', host: 'localhost', port: 80 });
      expect(targetFromHost('010.0.0.1', 80).type).to.equal('domain');
    });

    it('refuses to encode impossible inputs', () => {
      expect(() => encodeUserPasswordRequest('x'.repeat(256), 'p')).to.throw(RangeError);
      expect(() => encodeRequest('connect', { type: 'domain', host: '', port: 1 })).to.throw(RangeError);
      expect(() => encodeRequest('connect', { type: 'ipv4', host: '1.2.3', port: 1 })).to.throw(RangeError);
      expect(() => encodeRequest('connect', { type: 'ipv4', host: '1.2.3.4', port: 70000 })).to.throw(RangeError);
    });
  });

  describe('properties', () => {
    it('round-trips greetings', () => {
      fc.assert(
        fc.property(fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 255 }), (methods) => {
          const parsed = ok(parseGreeting(encodeGreeting(methods)));
          expect(parsed.value.methods).to.deep.equal(methods);
          expect(parsed.consumed).to.equal(2 + methods.length);
        }),
      );
    });

    it('round-trips username/password requests', () => {
      fc.assert(
        fc.property(credentialArb, credentialArb, (username, password) => {
          const encoded = encodeUserPasswordRequest(username, password);
          const parsed = ok(parseUserPasswordRequest(encoded));
          expect(parsed.value).to.deep.equal({ username, password });
          expect(parsed.consumed).to.equal(encoded.length);
        }),
      );
    });

    it('round-trips requests and replies for every address type', () => {
      fc.assert(
        fc.property(commandArb, targetArb, fc.integer({ min: 0, max: 255 }), (command, target, code) => {
          const request = ok(parseRequest(encodeRequest(command, target)));
          expect(request.value).to.deep.equal({ command, target });
          const reply = ok(parseReply(encodeReply(code, target)));
          expect(reply.value).to.deep.equal({ code, bound: target });
        }),
      );
    });

    it('never throws on arbitrary bytes, and answers need-more, ok or a typed error', () => {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat(8), (raw, offset) => {
          const buf = Buffer.from(raw);
          for (const [, parse] of parsers) {
            const outcome = parse(buf.subarray(Math.min(offset, buf.length)));
            if (outcome.status === 'ok') expect(outcome.consumed).to.be.within(1, buf.length);
            else if (outcome.status === 'error') expect(outcome.error).to.be.instanceOf(Socks5ProtocolError);
            else expect(outcome.status).to.equal('need-more');
          }
        }),
        { numRuns: fuzzRuns(2000) },
      );
    });

    it('sees every strict prefix of a valid message as need-more and the whole as the same message', () => {
      fc.assert(
        fc.property(commandArb, targetArb, fc.uint8Array({ maxLength: 20 }), (command, target, trailing) => {
          const message = encodeRequest(command, target);
          for (let cut = 0; cut < message.length; cut++) {
            expect(parseRequest(message.subarray(0, cut)).status).to.equal('need-more');
          }
          const whole = ok(parseRequest(Buffer.concat([message, trailing])));
          expect(whole.consumed).to.equal(message.length);
          expect(whole.value).to.deep.equal({ command, target });
        }),
      );
    });

    it('decides on an invalid byte as soon as it arrives, whatever follows', () => {
      fc.assert(
        fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), (raw) => {
          const buf = Buffer.from(raw);
          const whole = parseRequest(buf);
          if (whole.status !== 'error') return;
          // Some prefix already shows the same error; no longer input turns it into success.
          const firstErrorAt = [...Array(buf.length).keys()].find((cut) => parseRequest(buf.subarray(0, cut + 1)).status === 'error');
          expect(firstErrorAt).to.not.equal(undefined);
          const early = parseRequest(buf.subarray(0, firstErrorAt! + 1));
          expect(errorOf(early).code).to.equal(whole.error.code);
        }),
        { numRuns: fuzzRuns(500) },
      );
    });

    it('lists the methods the client offers, with both auth methods recognised', () => {
      expect(AuthMethod.NoAuthentication).to.equal(0);
      expect(AuthMethod.UsernamePassword).to.equal(2);
      expect(ok(parseMethodSelection(bytes(5, 0xff))).value).to.equal(0xff);
      expect(ok(parseUserPasswordReply(bytes(1, 0))).value).to.equal(true);
      expect(ok(parseUserPasswordReply(bytes(1, 1))).value).to.equal(false);
    });
  });
});
