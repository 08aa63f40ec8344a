import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { ChunkedBodyScanner, ChunkedFramingError } from '../../workers/proxy/chunked-body-scanner.js';
import { buildClientResponseHead, parseResponseHead, responseFraming, type ResponseHead } from '../../workers/proxy/http-response-head.js';
import { proxyStatusValue, serializeErrorResponse } from '../../workers/proxy/http-proxy-errors.js';

const chunkArb = fc.record({
  data: fc.uint8Array({ minLength: 1, maxLength: 300 }),
  extension: fc.constantFrom('', ';a=b', ' ;x', ';name="quoted value"'),
  upperHex: fc.boolean(),
});
const bodyArb = fc.record({
  chunks: fc.array(chunkArb, { maxLength: 6 }),
  trailers: fc.array(fc.stringMatching(/^X-[A-Za-z]{1,8}: [ -~]{0,20}$/), { maxLength: 3 }),
});

function encodeChunked(body: { chunks: Array<{ data: Uint8Array; extension: string; upperHex: boolean }>; trailers: string[] }): Buffer {
  const parts: Buffer[] = [];
  for (const chunk of body.chunks) {
    const size = chunk.data.length.toString(16);
    parts.push(Buffer.from(`${chunk.upperHex ? size.toUpperCase() : size}${chunk.extension}\r\n`, 'latin1'), Buffer.from(chunk.data), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`0\r\n${body.trailers.map((t) => `${t}\r\n`).join('')}\r\n`, 'latin1'));
  return Buffer.concat(parts);
}

/** Scans `buf` in pieces cut at `cuts`; returns the absolute end index or -1. */
function scanInPieces(buf: Buffer, cuts: number[]): { end: number; done: boolean } {
  const scanner = new ChunkedBodyScanner();
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const point of [...points, buf.length]) {
    if (point <= from) continue;
    const end = scanner.scan(buf, from, point);
    if (end === -1) return { end: -1, done: false };
    if (scanner.done) return { end, done: true };
    from = point;
  }
  return { end: buf.length, done: scanner.done };
}

describe('proxy: HTTP message framing', () => {
  describe('chunked body scanner', () => {
    it('finds the end of a chunked body followed by the next message', () => {
      const body = Buffer.from('4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Sum: 1\r\n\r\n', 'latin1');
      const next = Buffer.from('GET http://a/ HTTP/1.1\r\n\r\n');
      const scanner = new ChunkedBodyScanner();
      expect(scanner.scan(Buffer.concat([body, next]))).to.equal(body.length);
      expect(scanner.done).to.equal(true);
    });

    it('refuses broken framing with a typed error', () => {
      for (const bad of ['x\r\n', '4\r\nWikiX\r\n', '4\nWiki\r\n', '0\r\nX: 1\n\r\n', 'fffffffffffffff\r\n', '0\r\n\r\r']) {
        const scanner = new ChunkedBodyScanner();
        expect(scanner.scan(Buffer.from(bad, 'latin1')), JSON.stringify(bad)).to.equal(-1);
        expect(scanner.error).to.be.instanceOf(ChunkedFramingError);
      }
    });

    it('finds the same end whether the body arrives whole or split anywhere', () => {
      fc.assert(
        fc.property(bodyArb, fc.uint8Array({ maxLength: 20 }), fc.array(fc.nat(), { maxLength: 15 }), (body, trailing, cuts) => {
          const encoded = encodeChunked(body);
          const buf = Buffer.concat([encoded, Buffer.from(trailing)]);
          expect(scanInPieces(buf, [])).to.deep.equal({ end: encoded.length, done: true });
          expect(scanInPieces(buf, cuts)).to.deep.equal({ end: encoded.length, done: true });
        }),
        { numRuns: fuzzRuns(1000) },
      );
    });

    it('never throws on arbitrary bytes, and split delivery agrees with whole delivery', () => {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(), { maxLength: 10 }), (raw, cuts) => {
          const buf = Buffer.from(raw);
          expect(scanInPieces(buf, cuts)).to.deep.equal(scanInPieces(buf, []));
        }),
        { numRuns: fuzzRuns(2000) },
      );
    });
  });

  describe('response heads', () => {
    const responseOf = (text: string): ResponseHead => {
      const result = parseResponseHead(Buffer.from(text.replace(/\n/g, '\r\n'), 'latin1'));
      if (result.status !== 'ok') throw new Error(`expected ok: ${JSON.stringify(result)}`);
      return result.head;
    };

    it('frames responses per RFC 9112 section 6.3', () => {
      expect(responseFraming(responseOf('HTTP/1.1 200 OK\nContent-Length: 10\n\n'), 'GET')).to.deep.equal({ kind: 'length', length: 10 });
      expect(responseFraming(responseOf('HTTP/1.1 200 OK\nContent-Length: 10\n\n'), 'HEAD')).to.deep.equal({ kind: 'none' });
      expect(responseFraming(responseOf('HTTP/1.1 204 No Content\n\n'), 'GET')).to.deep.equal({ kind: 'none' });
      expect(responseFraming(responseOf('HTTP/1.1 304 Not Modified\nContent-Length: 5\n\n'), 'GET')).to.deep.equal({ kind: 'none' });
      expect(responseFraming(responseOf('HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nContent-Length: 3\n\n'), 'GET')).to.deep.equal({ kind: 'chunked' });
      expect(responseFraming(responseOf('HTTP/1.1 200 OK\nTransfer-Encoding: gzip\n\n'), 'GET')).to.deep.equal({ kind: 'until-close' });
      expect(responseFraming(responseOf('HTTP/1.0 200 OK\n\n'), 'GET')).to.deep.equal({ kind: 'until-close' });
      expect(responseFraming(responseOf('HTTP/1.1 200 OK\nContent-Length: 1\nContent-Length: 2\n\n'), 'GET')).to.be.instanceOf(Error);
    });

    it('relays the head without hop-by-hop fields and states its own connection handling', () => {
      const head = responseOf('HTTP/1.1 200 OK\nConnection: keep-alive, X-Hop\nKeep-Alive: timeout=5\nX-Hop: 1\nProxy-Authenticate: Basic\nUpgrade: h2c\nContent-Length: 2\nX-End: 2\n\n');
      expect(buildClientResponseHead(head, '1.1', true)).to.equal('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-End: 2\r\n\r\n');
      expect(buildClientResponseHead(head, '1.1', false)).to.equal('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-End: 2\r\nConnection: close\r\n\r\n');
      expect(buildClientResponseHead(head, '1.0', true)).to.include('Connection: keep-alive\r\n');
    });

    it('keeps Transfer-Encoding with a chunked body and drops a conflicting Content-Length', () => {
      const head = responseOf('HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nContent-Length: 3\n\n');
      expect(buildClientResponseHead(head, '1.1', true)).to.equal('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
    });

    it('refuses malformed or oversized response heads', () => {
      expect(parseResponseHead(Buffer.from('HTTP/2 200 OK\r\n\r\n')).status).to.equal('error');
      expect(parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nX : y\r\n\r\n')).status).to.equal('error');
      expect(parseResponseHead(Buffer.from(`HTTP/1.1 200 OK\r\nX: ${'y'.repeat(100)}`), 0, 64).status).to.equal('error');
      expect(parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nX: y\r\n')).status).to.equal('need-more');
    });
  });

  describe('proxy-generated responses', () => {
    it('carry an RFC 9209 Proxy-Status with an escaped details string and a plain-text body', () => {
      expect(proxyStatusValue('dns_error', 'say "hi" \\ bye')).to.equal('exitpool; error=dns_error; details="say \\"hi\\" \\\\ bye"');
      const text = serializeErrorResponse({ status: 503, error: 'destination_unavailable', message: 'no instance' }, true).toString('latin1');
      expect(text).to.match(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(text).to.include('Proxy-Status: exitpool; error=destination_unavailable; details="no instance"\r\n');
      expect(text).to.include('Content-Type: text/plain; charset=utf-8\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\nno instance\n');
    });
  });
});
