import { expect } from 'chai';
import fc from 'fast-check';
import { crossSiteReason, hostAllowed, hostOf } from '../../workers/api/request-origin.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

const POLICY = { bindHost: '127.0.0.1', allowedHosts: ['exitpool.internal'] };

describe('API request origin (Host and cross-site checks)', () => {
  it('reads the host out of a Host value', () => {
    const cases: [string, string | null][] = [
      ['Example.COM:8080', 'example.com'],
      ['example.com.', 'example.com'],
      ['[::1]:8080', '::1'],
      ['[::1]', '::1'],
      ['127.0.0.1', '127.0.0.1'],
      ['[::1', null],
      ['[nothost]:80', null],
      ['a b', null],
      ['host:port', null],
      ['', null],
      ['evil.example/path', null],
    ];
    for (const [value, host] of cases) expect(hostOf(value), value).to.equal(host);
  });

  it('allows IP literals, localhost names, BIND_HOST and listed names only', () => {
    for (const h of ['10.0.0.1:80', '[fe80::1]', 'localhost', 'a.localhost:1', 'exitpool.internal:8080']) expect(hostAllowed(h, POLICY), h).to.equal(true);
    for (const h of ['evil.example', 'localhost.evil.example', 'exitpool.internal.evil', '127.0.0.1.nip.io', '']) expect(hostAllowed(h, POLICY), h).to.equal(false);
    expect(hostAllowed('pool.lan', { bindHost: 'pool.lan', allowedHosts: [] })).to.equal(true);
    expect(hostAllowed('anything.example', { bindHost: '0.0.0.0', allowedHosts: ['*'] })).to.equal(true);
  });

  it('property: a name that is not localhost, allowed or the bind host is never allowed, and nothing throws', () => {
    const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/);
    fc.assert(
      fc.property(fc.array(label, { minLength: 1, maxLength: 4 }), fc.option(fc.integer({ min: 1, max: 65535 })), (labels, port) => {
        const name = [...labels, 'example'].join('.');
        const header = port === null ? name : `${name}:${port}`;
        expect(hostAllowed(header, POLICY)).to.equal(false);
      }),
      { numRuns: fuzzRuns(200) },
    );
    fc.assert(fc.property(fc.string({ maxLength: 300 }), (value) => {
      hostAllowed(value, POLICY);
      crossSiteReason({ method: 'POST', headers: { host: value, origin: value, 'sec-fetch-site': value } });
    }), { numRuns: fuzzRuns(200) });
  });

  it('refuses state-changing requests from other origins, never reads', () => {
    const host = '127.0.0.1:8080';
    expect(crossSiteReason({ method: 'POST', headers: { host } })).to.equal(null);
    expect(crossSiteReason({ method: 'POST', headers: { host, origin: 'http://127.0.0.1:8080' } })).to.equal(null);
    expect(crossSiteReason({ method: 'DELETE', headers: { host, 'sec-fetch-site': 'same-origin' } })).to.equal(null);
    expect(crossSiteReason({ method: 'POST', headers: { host, origin: 'http://127.0.0.1:9999' } })).to.match(/Origin/);
    expect(crossSiteReason({ method: 'POST', headers: { host, 'sec-fetch-site': 'same-site' } })).to.match(/same-site/);
    expect(crossSiteReason({ method: 'PUT', headers: { host, origin: 'null' } })).to.match(/null/);
    expect(crossSiteReason({ method: 'GET', headers: { host, origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' } })).to.equal(null);
  });
});
