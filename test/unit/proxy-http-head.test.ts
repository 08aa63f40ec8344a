import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import {
  HTTP_MAX_HEAD_BYTES,
  HttpHeadError,
  buildUpstreamRequestHead,
  parseProxyAuthorization,
  parseProxyRequestHead,
  type HeadParseResult,
  type ProxyRequestHead,
} from '../../workers/proxy/http-proxy-head.js';

function head(text: string): Buffer {
  return Buffer.from(text.replace(/\n/g, '\r\n'), 'latin1');
}

function parsed(result: HeadParseResult): ProxyRequestHead {
  if (result.status !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(result)}`);
  return result.head;
}

function refused(result: HeadParseResult): HttpHeadError {
  if (result.status !== 'error') throw new Error(`expected error, got ${result.status}`);
  return result.error;
}

const basic = (userPass: string): string => `Basic ${Buffer.from(userPass, 'utf8').toString('base64')}`;

describe('proxy: HTTP proxy request head', () => {
  describe('request targets', () => {
    it('parses CONNECT authority-form, including a bracketed IPv6 literal', () => {
      expect(parsed(parseProxyRequestHead(head('CONNECT example.com:443 HTTP/1.1\nHost: example.com:443\n\n'))).target).to.deep.equal({
        form: 'authority',
        host: 'example.com',
        port: 443,
      });
      expect(parsed(parseProxyRequestHead(head('CONNECT [::1]:8443 HTTP/1.1\n\n'))).target).to.deep.equal({ form: 'authority', host: '::1', port: 8443 });
      expect(parsed(parseProxyRequestHead(head('CONNECT [0:0::0:1]:1 HTTP/1.1\n\n'))).target).to.deep.include({ host: '::1' });
    });

    it('parses absolute-form with and without port, query, and bracketed IPv6', () => {
      const cases: Array<[string, { host: string; port: number; path: string }]> = [
        ['http://example.com/a/b?c=d', { host: 'example.com', port: 80, path: '/a/b?c=d' }],
        ['http://example.com:8080', { host: 'example.com', port: 8080, path: '/' }],
        ['HTTP://example.com?x', { host: 'example.com', port: 80, path: '/?x' }],
        ['http://[::1]:8080/x', { host: '::1', port: 8080, path: '/x' }],
        ['http://[2001:db8::1]/', { host: '2001:db8::1', port: 80, path: '/' }],
        ['http://127.0.0.1:/', { host: '127.0.0.1', port: 80, path: '/' }],
      ];
      for (const [target, expected] of cases) {
        expect(parsed(parseProxyRequestHead(head(`GET ${target} HTTP/1.1\n\n`))).target, target).to.deep.equal({ form: 'absolute', ...expected });
      }
    });

    it('refuses targets it cannot forward', () => {
      const cases: Array<[string, string]> = [
        ['GET / HTTP/1.1', 'bad-target'],
        ['GET https://example.com/ HTTP/1.1', 'unsupported-scheme'],
        ['GET http://user@example.com/ HTTP/1.1', 'bad-target'],
        ['GET http://example.com/#frag HTTP/1.1', 'bad-target'],
        ['GET http://exa mple.com/ HTTP/1.1', 'bad-request-line'],
        ['GET http://[::1/ HTTP/1.1', 'bad-target'],
        ['GET http://[fe80::1%25eth0]/ HTTP/1.1', 'bad-target'],
        ['GET http://example.com:0/ HTTP/1.1', 'bad-target'],
        ['GET http://example.com:65536/ HTTP/1.1', 'bad-target'],
        ['CONNECT example.com HTTP/1.1', 'bad-target'],
        ['CONNECT ::1:443 HTTP/1.1', 'bad-target'],
        ['GET http://ex%41mple.com/ HTTP/1.1', 'bad-target'],
        ['OPTIONS * HTTP/1.1', 'bad-target'],
      ];
      for (const [line, code] of cases) {
        const error = refused(parseProxyRequestHead(head(`${line}\n\n`)));
        expect(error.code, line).to.equal(code);
        expect(error.status).to.equal(400);
      }
    });

    it('answers 505 for other HTTP versions and 400 for garbage versions', () => {
      expect(refused(parseProxyRequestHead(head('GET http://a/ HTTP/2.0\n\n'))).status).to.equal(505);
      expect(refused(parseProxyRequestHead(head('GET http://a/ HTTX/1.1\n\n'))).status).to.equal(400);
    });
  });

  describe('fields', () => {
    it('finds fields case-insensitively and keeps their spelling', () => {
      const h = parsed(parseProxyRequestHead(head('GET http://a/ HTTP/1.1\nX-Thing:   v  \nhOsT: a\n\n')));
      expect(h.fields).to.deep.equal([
        { name: 'X-Thing', value: 'v' },
        { name: 'hOsT', value: 'a' },
      ]);
    });

    it('refuses obs-fold, whitespace before the colon, bare CR/LF and control bytes', () => {
      for (const bad of ['X: a\n  folded', 'X : a', 'X: a\rb', 'X: a\u0000b', ': novalue', 'Bad Name: x']) {
        const text = `GET http://a/ HTTP/1.1\r\n${bad.replace(/\n/g, '\r\n')}\r\n\r\n`;
        expect(refused(parseProxyRequestHead(Buffer.from(text, 'latin1'))).status, JSON.stringify(bad)).to.equal(400);
      }
      const bareLf = Buffer.from('GET http://a/ HTTP/1.1\nX: y\r\n\r\n', 'latin1');
      expect(refused(parseProxyRequestHead(bareLf)).code).to.equal('bad-field');
    });

    it('skips empty lines before the request line', () => {
      const result = parseProxyRequestHead(head('\n\nGET http://a/ HTTP/1.1\n\n'));
      expect(parsed(result).method).to.equal('GET');
      expect(result.status === 'ok' && result.consumed).to.equal(head('\n\nGET http://a/ HTTP/1.1\n\n').length);
    });
  });

  describe('framing', () => {
    const framingOf = (fields: string, version = '1.1'): HeadParseResult => parseProxyRequestHead(head(`POST http://a/ HTTP/${version}\n${fields}\n\n`));

    it('reads Content-Length and chunked bodies', () => {
      expect(parsed(framingOf('Content-Length: 12')).framing).to.deep.equal({ kind: 'length', length: 12 });
      expect(parsed(framingOf('Content-Length: 5, 5\nContent-Length: 005')).framing).to.deep.equal({ kind: 'length', length: 5 });
      expect(parsed(framingOf('Content-Length: 0')).framing).to.deep.equal({ kind: 'none' });
      expect(parsed(framingOf('Transfer-Encoding: gzip, Chunked')).framing).to.deep.equal({ kind: 'chunked' });
      expect(parsed(framingOf('X: y')).framing).to.deep.equal({ kind: 'none' });
    });

    it('refuses every ambiguous framing (request smuggling)', () => {
      for (const fields of [
        'Content-Length: 5\nTransfer-Encoding: chunked',
        'Content-Length: 5\nContent-Length: 6',
        'Content-Length: 5, 6',
        'Content-Length: -1',
        'Content-Length: 0x10',
        'Content-Length: ',
        'Transfer-Encoding: chunked, gzip',
        'Transfer-Encoding: chunked, chunked',
        'Transfer-Encoding: gzip',
      ]) {
        expect(refused(framingOf(fields)).code, fields).to.equal('bad-framing');
      }
      expect(refused(framingOf('Transfer-Encoding: chunked', '1.0')).code).to.equal('bad-framing');
    });

    it('knows when the client wants the connection kept', () => {
      expect(parsed(framingOf('X: y')).keepAlive).to.equal(true);
      expect(parsed(framingOf('Connection: Close')).keepAlive).to.equal(false);
      expect(parsed(framingOf('X: y', '1.0')).keepAlive).to.equal(false);
      expect(parsed(framingOf('Connection: keep-alive', '1.0')).keepAlive).to.equal(true);
      expect(parsed(framingOf('Proxy-Connection: Keep-Alive', '1.0')).keepAlive).to.equal(true);
    });
  });

  describe('Proxy-Authorization', () => {
    const credentialsOf = (value: string): ReturnType<typeof parseProxyAuthorization> => parseProxyAuthorization([{ name: 'Proxy-Authorization', value }]);

    it('splits Basic user:password at the first colon', () => {
      expect(credentialsOf(basic('session-1:tp_abc:def'))).to.deep.equal({ username: 'session-1', password: 'tp_abc:def' });
      expect(credentialsOf(basic(':tp_abc'))).to.deep.equal({ username: null, password: 'tp_abc' });
      expect(credentialsOf(basic('ключ:tp_x'))).to.deep.equal({ username: 'ключ', password: 'tp_x' });
      expect(credentialsOf(`bAsIc ${Buffer.from('a:b').toString('base64')}`)).to.deep.equal({ username: 'a', password: 'b' });
    });

    it('treats garbage as no credential', () => {
      for (const value of ['Basic', 'Basic !!!!', 'Basic YWJj', 'Bearer tp_abc', 'Basic YQ=a', 'Basic ' + Buffer.from([0xff, 0x3a, 0x61]).toString('base64'), 'Basic YWJjOmRl ZWY=']) {
        expect(credentialsOf(value), value).to.equal(null);
      }
      expect(parseProxyAuthorization([])).to.equal(null);
      expect(
        parseProxyAuthorization([
          { name: 'Proxy-Authorization', value: basic('a:b') },
          { name: 'proxy-authorization', value: basic('c:d') },
        ]),
      ).to.equal(null);
    });
  });

  describe('forwarded head', () => {
    it('uses origin-form, rewrites Host and strips hop-by-hop fields and the credential', () => {
      const h = parsed(
        parseProxyRequestHead(
          head(
            [
              'POST http://[::1]:8080/submit?q=1 HTTP/1.1',
              'Host: evil.example',
              `Proxy-Authorization: ${basic('k:tp_secret')}`,
              'Connection: keep-alive, X-Drop-Me, content-length',
              'Proxy-Connection: keep-alive',
              'Keep-Alive: timeout=5',
              'TE: trailers',
              'Upgrade: websocket',
              'X-Drop-Me: 1',
              'X-Keep: 2',
              'Content-Length: 3',
              'Trailer: X-Checksum',
              '',
              '',
            ].join('\n'),
          ),
        ),
      );
      const forwarded = buildUpstreamRequestHead(h);
      expect(forwarded).to.equal(
        [
          'POST /submit?q=1 HTTP/1.1',
          'Host: [::1]:8080',
          'X-Keep: 2',
          'Content-Length: 3',
          'Trailer: X-Checksum',
          'Connection: close',
          '',
          '',
        ].join('\r\n'),
      );
      expect(forwarded).to.not.include('tp_secret');
    });

    it('omits the default port from Host', () => {
      const h = parsed(parseProxyRequestHead(head('GET http://example.com:80/ HTTP/1.0\n\n')));
      expect(buildUpstreamRequestHead(h)).to.equal('GET / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n');
    });
  });

  describe('size limit', () => {
    it('answers 431 for a head over the limit, complete or not', () => {
      const big = `GET http://a/ HTTP/1.1\r\nX: ${'a'.repeat(HTTP_MAX_HEAD_BYTES)}\r\n\r\n`;
      expect(refused(parseProxyRequestHead(Buffer.from(big))).status).to.equal(431);
      expect(refused(parseProxyRequestHead(Buffer.from(big.slice(0, HTTP_MAX_HEAD_BYTES + 1)))).status).to.equal(431);
      expect(parseProxyRequestHead(Buffer.from(big.slice(0, HTTP_MAX_HEAD_BYTES))).status).to.equal('need-more');
    });
  });

  describe('properties', () => {
    const tokenArb = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/);
    const hostArb = fc.oneof(
      fc.domain(),
      fc.ipV4(),
      fc.ipV6().map((v6) => new URL(`http://[${v6}]/`).hostname.slice(1, -1)),
    );
    const pathArb = fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`));
    const valueArb = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,30}[\x21-\x7e])?$/);
    const fieldArb = fc.record({ name: tokenArb.filter((n) => !/^(content-length|transfer-encoding|proxy-authorization)$/i.test(n)), value: valueArb });
    const requestArb = fc.record({
      method: fc.oneof(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'CONNECT'), tokenArb),
      host: hostArb,
      port: fc.integer({ min: 1, max: 65535 }),
      path: pathArb,
      version: fc.constantFrom('1.0' as const, '1.1' as const),
      fields: fc.array(fieldArb, { maxLength: 8 }),
      user: fc.option(fc.string({ minLength: 1, maxLength: 10 }).filter((s) => !s.includes(':')), { nil: null }),
      password: fc.option(fc.string({ minLength: 1, maxLength: 10 }), { nil: null }),
    });

    type GeneratedRequest = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

    function render(r: GeneratedRequest): Buffer {
      const hostText = r.host.includes(':') ? `[${r.host}]` : r.host;
      const target = r.method === 'CONNECT' ? `${hostText}:${r.port}` : `http://${hostText}:${r.port}${r.path}`;
      let text = `${r.method} ${target} HTTP/${r.version}\r\n`;
      for (const f of r.fields) text += `${f.name}: ${f.value}\r\n`;
      if (r.user !== null || r.password !== null) text += `Proxy-Authorization: ${basic(`${r.user ?? ''}:${r.password ?? ''}`)}\r\n`;
      return Buffer.from(`${text}\r\n`, 'latin1');
    }

    it('parses generated valid requests back to their parts', () => {
      fc.assert(
        fc.property(requestArb, (r) => {
          const result = parseProxyRequestHead(render(r));
          const h = parsed(result);
          expect(h.method).to.equal(r.method);
          expect(h.version).to.equal(r.version);
          expect(h.target.host).to.equal(r.host);
          expect(h.target.port).to.equal(r.port);
          if (h.target.form === 'absolute') expect(h.target.path).to.equal(r.path);
          expect(h.target.form).to.equal(r.method === 'CONNECT' ? 'authority' : 'absolute');
          expect(h.fields.slice(0, r.fields.length)).to.deep.equal(r.fields);
          if (r.user === null && r.password === null) expect(h.credentials).to.equal(null);
          else expect(h.credentials).to.deep.equal({ username: r.user, password: r.password });
        }),
        { numRuns: fuzzRuns(1000) },
      );
    });

    it('gives the same answer whether the head arrives whole or in pieces', () => {
      fc.assert(
        fc.property(requestArb, fc.array(fc.nat(), { maxLength: 10 }), (r, cuts) => {
          const whole = render(r);
          const points = [...new Set(cuts.map((c) => c % whole.length))].sort((a, b) => a - b);
          let scannedTo = 0;
          for (const point of points) {
            const partial = parseProxyRequestHead(whole.subarray(0, point), { scanFrom: scannedTo });
            expect(partial.status).to.equal('need-more');
            if (partial.status === 'need-more') scannedTo = partial.scannedTo;
          }
          expect(parseProxyRequestHead(whole, { scanFrom: scannedTo })).to.deep.equal(parseProxyRequestHead(whole));
        }),
        { numRuns: fuzzRuns(500) },
      );
    });

    it('never throws on arbitrary bytes and answers need-more, ok or a typed error', () => {
      const arbitrary = fc.oneof(
        fc.uint8Array({ maxLength: 400 }).map((a) => Buffer.from(a)),
        fc.tuple(requestArb, fc.uint8Array({ maxLength: 40 }), fc.nat()).map(([r, noise, at]) => {
          const b = render(r);
          const i = at % b.length;
          return Buffer.concat([b.subarray(0, i), Buffer.from(noise), b.subarray(i)]);
        }),
      );
      fc.assert(
        fc.property(arbitrary, (buf) => {
          const result = parseProxyRequestHead(buf);
          if (result.status === 'error') expect(result.error).to.be.instanceOf(HttpHeadError);
          else if (result.status === 'ok') expect(result.consumed).to.be.at.most(buf.length);
          else expect(result.status).to.equal('need-more');
        }),
        { numRuns: fuzzRuns(2000) },
      );
    });

    it('refuses every head larger than the limit', () => {
      fc.assert(
        fc.property(requestArb, fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 256, max: 4096 }), (r, extra, limit) => {
          const base = render(r);
          const padded = Buffer.concat([base.subarray(0, base.length - 2), Buffer.from(`X-Pad: ${'p'.repeat(limit + extra)}\r\n\r\n`)]);
          expect(refused(parseProxyRequestHead(padded, { maxBytes: limit })).status).to.equal(431);
        }),
        { numRuns: fuzzRuns(300) },
      );
    });
  });
});
