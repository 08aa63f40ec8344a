import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import {
  ControlReplyParser,
  getInfoValues,
  isAsyncEvent,
  isSuccess,
  replyMessage,
  type ControlReply,
  type ParsedItem,
  type ReplyLine,
} from '../../supervisor/tor/control-reply.js';
import { ControlProtocolError } from '../../supervisor/tor/errors.js';

function parseAll(input: string | Buffer): ParsedItem[] {
  return new ControlReplyParser().push(input);
}

function replies(input: string | Buffer): ControlReply[] {
  return parseAll(input).map((item) => {
    if (item.kind !== 'reply') throw item.error;
    return item.reply;
  });
}

/** Serialises a reply as tor would: CRLF, dot-stuffed data blocks. */
function serialise(reply: ControlReply): string {
  return reply.lines
    .map((line) => {
      let out = `${line.status}${line.separator}${line.text}\r\n`;
      if (line.separator === '+') {
        const data = line.data ?? '';
        for (const d of data.split('\n')) out += `${d.startsWith('.') ? '.' : ''}${d}\r\n`;
        out += '.\r\n';
      }
      return out;
    })
    .join('');
}

describe('tor control reply parser', () => {
  it('parses a single-line reply', () => {
    expect(replies('250 OK\r\n')).to.deep.equal([{ status: 250, lines: [{ status: 250, separator: ' ', text: 'OK' }] }]);
  });

  it('parses multi-line replies and keeps the final status', () => {
    const [reply] = replies('250-version=0.4.9.11\r\n250-status/circuit-established=1\r\n250 OK\r\n');
    expect(reply!.lines.map((l) => l.separator)).to.deep.equal(['-', '-', ' ']);
    expect(reply!.status).to.equal(250);
    expect(isSuccess(reply!)).to.equal(true);
    expect(getInfoValues(reply!)).to.deep.equal(
      new Map([
        ['version', '0.4.9.11'],
        ['status/circuit-established', '1'],
      ]),
    );
  });

  it('parses data replies with dot-unstuffing', () => {
    const input =
      '250+ns/id/AAAA=\r\nr exit1 AAAA 2026-11-22 05:00:00 127.0.0.11 5011 0\r\n..starts with dot\r\n.\r\n250 OK\r\n';
    const [reply] = replies(input);
    expect(reply!.lines[0]).to.deep.equal({
      status: 250,
      separator: '+',
      text: 'ns/id/AAAA=',
      data: 'r exit1 AAAA 2026-11-22 05:00:00 127.0.0.11 5011 0\n.starts with dot',
    });
    expect(getInfoValues(reply!).get('ns/id/AAAA')).to.equal(
      'r exit1 AAAA 2026-11-22 05:00:00 127.0.0.11 5011 0\n.starts with dot',
    );
  });

  it('parses an empty data block', () => {
    const [reply] = replies('250+circuit-status=\r\n.\r\n250 OK\r\n');
    expect(reply!.lines[0]!.data).to.equal('');
  });

  it('marks 650 replies as asynchronous events, including multi-line ones', () => {
    const out = replies('650 CIRC 1 LAUNCHED\r\n650-NS\r\n650 OK\r\n552 Unrecognized key "x"\r\n');
    expect(out.map(isAsyncEvent)).to.deep.equal([true, true, false]);
    expect(isSuccess(out[2]!)).to.equal(false);
    expect(replyMessage(out[2]!)).to.equal('Unrecognized key "x"');
  });

  it('tolerates bare LF line endings and an end line without text', () => {
    expect(replies('250-a=1\n250\n')).to.deep.equal([
      {
        status: 250,
        lines: [
          { status: 250, separator: '-', text: 'a=1' },
          { status: 250, separator: ' ', text: '' },
        ],
      },
    ]);
  });

  it('keeps a partial line until its end arrives', () => {
    const parser = new ControlReplyParser();
    expect(parser.push('250 O')).to.deep.equal([]);
    expect(parser.idle).to.equal(false);
    expect(parser.push('K\r')).to.deep.equal([]);
    expect(parser.push('\n')).to.have.length(1);
    expect(parser.idle).to.equal(true);
  });

  it('reassembles a UTF-8 character split across chunks', () => {
    const bytes = Buffer.from('250 caf\u00e9\r\n', 'utf8');
    const parser = new ControlReplyParser();
    const split = bytes.indexOf(0xc3) + 1;
    const out = [...parser.push(bytes.subarray(0, split)), ...parser.push(bytes.subarray(split))];
    expect(out).to.have.length(1);
    expect(out[0]!.kind === 'reply' && out[0]!.reply.lines[0]!.text).to.equal('caf\u00e9');
  });

  it('reports a malformed line as a typed error and resynchronises on the next line', () => {
    const out = parseAll('250-a=1\r\nhello\r\n250 OK\r\n');
    expect(out[0]!.kind).to.equal('error');
    expect(out[0]!.kind === 'error' && out[0]!.error).to.be.instanceOf(ControlProtocolError);
    expect(out[0]!.kind === 'error' && out[0]!.error.line).to.equal('hello');
    // The reply that contained the bad line is dropped; the next line starts afresh.
    expect(out[1]).to.deep.equal({ kind: 'reply', reply: { status: 250, lines: [{ status: 250, separator: ' ', text: 'OK' }] } });
  });

  for (const bad of ['25 OK', '2500OK', 'abc OK', '250*OK', '', ' 250 OK']) {
    it(`refuses ${JSON.stringify(bad)} as ControlProtocolError`, () => {
      const out = parseAll(`${bad}\r\n`);
      expect(out).to.have.length(1);
      expect(out[0]!.kind).to.equal('error');
    });
  }

  it('refuses an over-long line once and recovers', () => {
    const parser = new ControlReplyParser(16);
    const out = [...parser.push('250-' + 'x'.repeat(40)), ...parser.push('yyy\r\n250 OK\r\n')];
    expect(out.map((o) => o.kind)).to.deep.equal(['error', 'reply']);
  });

  it('refuses an over-large data block and skips it to its end', () => {
    const parser = new ControlReplyParser(1024, 10);
    const out = parser.push('250+k=\r\n0123456789\r\nmore\r\n.\r\n250 OK\r\n');
    expect(out.map((o) => o.kind)).to.deep.equal(['error', 'reply']);
  });

  it('getInfoValues refuses a value line without =', () => {
    const [reply] = replies('250-novalue\r\n250 OK\r\n');
    expect(() => getInfoValues(reply!)).to.throw(ControlProtocolError);
  });

  // ---- properties ----

  const replyLineText = fc.string({ unit: 'grapheme-ascii', maxLength: 30 }).filter((s) => !/[\r\n]/.test(s));
  const dataText = fc
    .array(fc.string({ unit: 'grapheme-ascii', maxLength: 20 }).filter((s) => !/[\r\n]/.test(s)), { maxLength: 5 })
    .map((ls) => ls.join('\n'));
  const status = fc.integer({ min: 100, max: 999 });
  const arbitraryReply: fc.Arbitrary<ControlReply> = fc
    .tuple(
      status,
      fc.array(
        fc.oneof(
          fc.record({ separator: fc.constant<'-'>('-'), text: replyLineText }),
          fc.record({ separator: fc.constant<'+'>('+'), text: replyLineText, data: dataText }),
        ),
        { maxLength: 4 },
      ),
      replyLineText,
    )
    .map(([code, middle, endText]) => {
      const lines: ReplyLine[] = middle.map((m) => ({ status: code, ...m }));
      lines.push({ status: code, separator: ' ', text: endText });
      return { status: code, lines };
    });

  it('property: serialised replies parse back to themselves', () => {
    fc.assert(
      fc.property(fc.array(arbitraryReply, { maxLength: 5 }), (rs) => {
        expect(replies(rs.map(serialise).join(''))).to.deep.equal(rs);
      }),
    );
  });

  it('property: parsing in arbitrary chunks equals parsing the whole', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.array(arbitraryReply, { maxLength: 5 }).map((rs) => Buffer.from(rs.map(serialise).join(''))),
          fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
        ),
        fc.array(fc.nat(), { maxLength: 10 }),
        (input, cuts) => {
          const whole = new ControlReplyParser(64, 128).push(input);
          const parser = new ControlReplyParser(64, 128);
          const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
          const chunked: ParsedItem[] = [];
          let at = 0;
          for (const p of [...points, input.length]) {
            chunked.push(...parser.push(input.subarray(at, p)));
            at = p;
          }
          expect(chunked).to.deep.equal(whole);
        },
      ),
      { numRuns: fuzzRuns(500) },
    );
  });

  it('property: arbitrary bytes never throw; failures are ControlProtocolError items', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 200 }), { maxLength: 5 }), (chunks) => {
        const parser = new ControlReplyParser(100, 100);
        for (const chunk of chunks) {
          for (const item of parser.push(Buffer.from(chunk))) {
            if (item.kind === 'error') expect(item.error).to.be.instanceOf(ControlProtocolError);
            else expect(item.reply.lines.length).to.be.greaterThan(0);
          }
        }
      }),
      { numRuns: fuzzRuns(1000) },
    );
  });

  it('property: a malformed line inside a stream of valid replies costs only its own reply', () => {
    fc.assert(
      fc.property(
        fc.array(arbitraryReply, { minLength: 1, maxLength: 4 }),
        fc.string({ unit: 'grapheme-ascii', maxLength: 20 }).filter((s) => !/^\d{3}([- +]|$)/.test(s) && !/[\r\n]/.test(s)),
        (rs, junk) => {
          const items = parseAll(`${junk}\r\n${rs.map(serialise).join('')}`);
          expect(items[0]!.kind).to.equal('error');
          expect(items.slice(1)).to.deep.equal(rs.map((reply) => ({ kind: 'reply', reply })));
        },
      ),
    );
  });
});
