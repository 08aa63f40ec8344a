import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { parseArguments, parseQuotedString, quoteString } from '../../supervisor/tor/control-arguments.js';
import {
  parseBootstrapPhase,
  parseCircuitLine,
  parseEvent,
  parseRouterStatus,
  parseStreamLine,
} from '../../supervisor/tor/control-events.js';
import { ControlReplyParser, type ControlReply } from '../../supervisor/tor/control-reply.js';
import { ControlArgumentError, ControlProtocolError } from '../../supervisor/tor/errors.js';

const FP1 = 'A'.repeat(40);
const FP2 = '0123456789ABCDEF0123456789ABCDEF01234567';
const FP3 = 'f'.repeat(40);

function reply(text: string): ControlReply {
  const [item] = new ControlReplyParser().push(text);
  if (!item || item.kind !== 'reply') throw new Error('no reply');
  return item.reply;
}

describe('tor control arguments', () => {
  it('splits positional tokens and KEY=VALUE pairs, quoted values included', () => {
    const parsed = parseArguments('NOTICE BOOTSTRAP PROGRESS=85 TAG=ap_conn_done SUMMARY="Connecting to a relay to build circuits"');
    expect(parsed.positional).to.deep.equal(['NOTICE', 'BOOTSTRAP']);
    expect(parsed.keywords.get('PROGRESS')).to.equal('85');
    expect(parsed.keywords.get('SUMMARY')).to.equal('Connecting to a relay to build circuits');
  });

  it('keeps circuit paths positional even though they contain =', () => {
    const parsed = parseArguments(`12 BUILT $${FP1}=named,$${FP2}~nick2 PURPOSE=GENERAL`);
    expect(parsed.positional).to.deep.equal(['12', 'BUILT', `$${FP1}=named,$${FP2}~nick2`]);
    expect(parsed.keywords.get('PURPOSE')).to.equal('GENERAL');
  });

  it('decodes backslash escapes in quoted strings', () => {
    expect(parseQuotedString('"a\\"b\\\\c\\n\\t\\r\\101\\x42\\\'"', 0)).to.deep.equal({ value: 'a"b\\c\n\t\rAB\'', end: 25 });
    expect(parseArguments('K="" L="x y"').keywords).to.deep.equal(
      new Map([
        ['K', ''],
        ['L', 'x y'],
      ]),
    );
    // Octal escapes are bytes: a UTF-8 sequence written as octal decodes to its character.
    expect(parseQuotedString('"\\303\\251"', 0).value).to.equal('\u00e9');
  });

  for (const bad of ['K="unterminated', 'K="x"junk', '"a"b', 'K="bad\\xZZ"', 'K="trailing\\']) {
    it(`refuses ${JSON.stringify(bad)} with ControlArgumentError`, () => {
      expect(() => parseArguments(bad)).to.throw(ControlArgumentError);
    });
  }

  it('property: quoteString round-trips any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 50 }), (s) => {
        const quoted = quoteString(s);
        expect(quoted).not.to.match(/[\r\n]/);
        expect(parseQuotedString(quoted, 0)).to.deep.equal({ value: s, end: quoted.length });
        expect(parseArguments(`KEY=${quoted} NEXT=1`).keywords.get('KEY')).to.equal(s);
      }),
      { numRuns: fuzzRuns(1000) },
    );
  });

  it('property: parseArguments on any text returns or throws ControlArgumentError only', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (s) => {
        try {
          parseArguments(s);
        } catch (error) {
          expect(error).to.be.instanceOf(ControlArgumentError);
        }
      }),
      { numRuns: fuzzRuns(2000) },
    );
  });
});

describe('tor control events', () => {
  it('parses a CIRC BUILT event with path, purpose, flags and time', () => {
    const event = parseEvent(
      reply(
        `650 CIRC 12 BUILT $${FP1}~guard,$${FP2}~middle,$${FP3}~exit1 BUILD_FLAGS=NEED_CAPACITY,NEED_UPTIME PURPOSE=GENERAL TIME_CREATED=2026-11-22T05:00:00.123456\r\n`,
      ),
    );
    expect(event).to.deep.equal({
      type: 'CIRC',
      id: '12',
      status: 'BUILT',
      path: [
        { fingerprint: FP1, nickname: 'guard' },
        { fingerprint: FP2, nickname: 'middle' },
        { fingerprint: FP3.toUpperCase(), nickname: 'exit1' },
      ],
      buildFlags: ['NEED_CAPACITY', 'NEED_UPTIME'],
      purpose: 'GENERAL',
      timeCreated: '2026-11-22T05:00:00.123456',
    });
  });

  it('parses a LAUNCHED circuit without a path and a CLOSED one with a reason', () => {
    expect(parseCircuitLine('7 LAUNCHED BUILD_FLAGS=IS_INTERNAL PURPOSE=GENERAL')).to.deep.include({
      id: '7',
      status: 'LAUNCHED',
      path: [],
      buildFlags: ['IS_INTERNAL'],
    });
    expect(parseCircuitLine(`7 CLOSED $${FP1} REASON=FINISHED`)).to.deep.include({ reason: 'FINISHED', path: [{ fingerprint: FP1 }] });
    // A circuit the network destroyed says why in REMOTE_REASON (a dead exit relay's, seen on the private network).
    const destroyed = parseCircuitLine(`8 FAILED $${FP1}~g,$${FP1}~m BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=CHANNEL_CLOSED`);
    expect(destroyed).to.deep.include({ reason: 'DESTROYED', remoteReason: 'CHANNEL_CLOSED' });
    expect(parseCircuitLine(`7 CLOSED $${FP1} REASON=FINISHED`).remoteReason).to.equal(undefined);
  });

  it('parses STREAM events', () => {
    expect(parseEvent(reply('650 STREAM 5 SUCCEEDED 12 1.2.3.4:80\r\n'))).to.deep.equal({
      type: 'STREAM',
      id: '5',
      status: 'SUCCEEDED',
      circuitId: '12',
      target: '1.2.3.4:80',
    });
    expect(parseStreamLine('9 NEW 0 example.testnet:443 SOURCE_ADDR=127.0.0.1:5555 PURPOSE=USER')).to.deep.equal({
      id: '9',
      status: 'NEW',
      circuitId: '0',
      target: 'example.testnet:443',
      purpose: 'USER',
    });
    expect(parseStreamLine('9 CLOSED 12 1.2.3.4:80 REASON=DONE').reason).to.equal('DONE');
  });

  it('parses STATUS_CLIENT BOOTSTRAP events', () => {
    const event = parseEvent(
      reply('650 STATUS_CLIENT NOTICE BOOTSTRAP PROGRESS=85 TAG=ap_conn_done SUMMARY="Connecting to a relay to build circuits"\r\n'),
    );
    expect(event.type).to.equal('STATUS_CLIENT');
    if (event.type !== 'STATUS_CLIENT') return;
    expect(event.severity).to.equal('NOTICE');
    expect(event.action).to.equal('BOOTSTRAP');
    expect(event.bootstrap).to.deep.equal({
      severity: 'NOTICE',
      progress: 85,
      tag: 'ap_conn_done',
      summary: 'Connecting to a relay to build circuits',
    });
  });

  it('parses status/bootstrap-phase text and ignores non-bootstrap status events', () => {
    expect(parseBootstrapPhase('NOTICE BOOTSTRAP PROGRESS=100 TAG=done SUMMARY="Done"')).to.deep.equal({
      severity: 'NOTICE',
      progress: 100,
      tag: 'done',
      summary: 'Done',
    });
    expect(parseBootstrapPhase('WARN BOOTSTRAP PROGRESS=5 TAG=conn SUMMARY="x" WARNING="refused"')?.warning).to.equal('refused');
    expect(parseBootstrapPhase('NOTICE CIRCUIT_ESTABLISHED')).to.equal(undefined);
    expect(parseBootstrapPhase('NOTICE BOOTSTRAP PROGRESS=101')).to.equal(undefined);
    const other = parseEvent(reply('650 STATUS_CLIENT NOTICE CIRCUIT_ESTABLISHED\r\n'));
    expect(other.type === 'STATUS_CLIENT' && other.bootstrap).to.equal(undefined);
  });

  it('passes unknown events through as OTHER', () => {
    expect(parseEvent(reply('650 BW 10 20\r\n'))).to.deep.equal({ type: 'OTHER', name: 'BW', text: '10 20' });
  });

  it('refuses malformed circuit and stream lines with typed errors', () => {
    expect(() => parseCircuitLine('x BUILT')).to.throw(ControlProtocolError);
    expect(() => parseCircuitLine('12')).to.throw(ControlProtocolError);
    expect(() => parseCircuitLine('12 BUILT $NOTHEX')).to.throw(ControlProtocolError);
    expect(() => parseStreamLine('5 SUCCEEDED')).to.throw(ControlProtocolError);
    expect(() => parseEvent(reply('650 CIRC 1 BUILT K="open\r\n'))).to.throw(ControlArgumentError);
  });

  it('parses router status entries with and without the descriptor digest', () => {
    const identity = Buffer.from(FP2, 'hex').toString('base64').replace(/=+$/, '');
    const withDigest = `r exit1 ${identity} AAAAAAAAAAAAAAAAAAAAAAAAAAA 2026-11-22 05:00:00 127.0.0.11 5011 0\ns Exit Fast Running Stable Valid\nw Bandwidth=1000`;
    expect(parseRouterStatus(withDigest)).to.deep.equal({
      nickname: 'exit1',
      fingerprint: FP2,
      address: '127.0.0.11',
      orPort: 5011,
      flags: ['Exit', 'Fast', 'Running', 'Stable', 'Valid'],
    });
    const microdesc = `r exit2 ${identity} 2026-11-22 05:00:00 127.0.0.12 5012 0\nm sha256digest`;
    expect(parseRouterStatus(microdesc)).to.deep.include({ nickname: 'exit2', address: '127.0.0.12', orPort: 5012, flags: [] });
    expect(() => parseRouterStatus('s Exit')).to.throw(ControlProtocolError);
    expect(() => parseRouterStatus('r x y')).to.throw(ControlProtocolError);
  });
});
