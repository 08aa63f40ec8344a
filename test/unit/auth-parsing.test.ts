import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { parseAuthorizationHeader, MAX_AUTHORIZATION_HEADER_LENGTH } from '../../workers/api/auth/authorization-header.js';
import { classifyCredential } from '../../shared/auth/credential-kind.js';
import { AuthBadRequestError } from '../../shared/auth/errors.js';
import { MAX_LOGIN_PASSWORD_LENGTH, MAX_LOGIN_USER_LENGTH, parseLoginBody } from '../../workers/api/auth/login-body.js';
import { MAX_TOKEN_NAME_LENGTH, parseTokenCreateBody } from '../../shared/auth/token-request.js';

const KINDS = ['bearer', 'basic', 'none', 'malformed'];
const basic = (text: string): string => `Basic ${Buffer.from(text, 'utf8').toString('base64')}`;
const noControl = (s: string): boolean => !/\p{Cc}/u.test(s);

describe('auth parsing', () => {
  describe('parseAuthorizationHeader', () => {
    it('reads bearer and basic, scheme case-insensitive', () => {
      expect(parseAuthorizationHeader('Bearer tp_abc')).to.deep.equal({ kind: 'bearer', credential: 'tp_abc' });
      expect(parseAuthorizationHeader('bEaReR   a.b.c  ')).to.deep.equal({ kind: 'bearer', credential: 'a.b.c' });
      expect(parseAuthorizationHeader(basic('key:tp_x'))).to.deep.equal({ kind: 'basic', user: 'key', password: 'tp_x' });
      expect(parseAuthorizationHeader('BASIC ' + Buffer.from('k:p:q').toString('base64'))).to.deep.equal({ kind: 'basic', user: 'k', password: 'p:q' });
      expect(parseAuthorizationHeader(basic(':tp_x'))).to.deep.equal({ kind: 'basic', user: '', password: 'tp_x' });
    });

    it('tells none from malformed', () => {
      for (const v of [undefined, null, '', '   ']) expect(parseAuthorizationHeader(v)).to.deep.equal({ kind: 'none' });
      for (const v of [
        'Bearer',
        'Bearer ',
        'Bearer a b',
        'Bearer a\tb',
        'Bearer ä',
        'Token abc',
        'Digest username="x"',
        'Basic not*base64',
        'Basic YWJj', // "abc": no colon
        'Basic YWJjOmRlZg', // unpadded
        basic('a\nb:c'),
        basic('a:b\u0000'),
        'Basic ' + Buffer.from([0xff, 0x3a, 0x41]).toString('base64'), // not UTF-8
        'Bearer ' + 'a'.repeat(MAX_AUTHORIZATION_HEADER_LENGTH),
        42,
        ['Bearer x'],
        {},
      ]) {
        expect(parseAuthorizationHeader(v), String(v).slice(0, 40)).to.deep.equal({ kind: 'malformed' });
      }
    });

    it('stays linear on pathological input (no regex backtracking blow-up)', () => {
      const half = Math.floor(MAX_AUTHORIZATION_HEADER_LENGTH / 2) - 8;
      const inputs = [
        'Bearer ' + ' \t'.repeat(half) + 'x',
        'Bearer x' + ' '.repeat(half * 2 - 4) + 'y',
        'Basic ' + 'A'.repeat(half * 2 - 1) + '=',
        'Bearer ' + 'a.'.repeat(half),
      ];
      // A backtracking blow-up on inputs this long takes hours, not milliseconds: the test's
      // timeout is the bound, with no figure of this machine's speed in the assertion.
      for (let i = 0; i < 20; i++) for (const input of inputs) expect(parseAuthorizationHeader(input).kind).to.be.a('string');
      for (let i = 0; i < 20; i++) classifyCredential('a.'.repeat(2000) + '!');
    });

    it('never throws, and always answers one of the four kinds (property)', () => {
      fc.assert(
        fc.property(fc.anything({ maxDepth: 2 }), (value) => {
          expect(KINDS).to.include(parseAuthorizationHeader(value).kind);
        }),
      );
      fc.assert(
        fc.property(fc.constantFrom('Bearer ', 'Basic ', 'basic ', ''), fc.string({ unit: 'binary', maxLength: 300 }), (scheme, rest) => {
          expect(KINDS).to.include(parseAuthorizationHeader(scheme + rest).kind);
        }),
      );
    });

    it('round-trips any basic user and password (property)', () => {
      fc.assert(
        fc.property(
          fc.string({ unit: 'binary', maxLength: 100 }).filter((s) => !s.includes(':') && noControl(s)),
          fc.string({ unit: 'binary', maxLength: 100 }).filter(noControl),
          (user, password) => {
            expect(parseAuthorizationHeader(basic(`${user}:${password}`))).to.deep.equal({ kind: 'basic', user, password });
          },
        ),
      );
    });

    it('round-trips any token68 bearer credential (property)', () => {
      const token68 = fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,200}=*$/);
      fc.assert(
        fc.property(token68, (credential) => {
          expect(parseAuthorizationHeader(`Bearer ${credential}`)).to.deep.equal({ kind: 'bearer', credential });
        }),
      );
    });
  });

  describe('classifyCredential', () => {
    it('sorts tokens, JWTs and the rest', () => {
      expect(classifyCredential('tp_AAAA')).to.equal('token');
      expect(classifyCredential('tp_old-style_token')).to.equal('token');
      expect(classifyCredential('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln')).to.equal('jwt');
      expect(classifyCredential('eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.')).to.equal('jwt');
      for (const t of ['', 'abc', 'a.b', 'a.b.c.d', 'a+b.c.d', 'tp' + '_'.repeat(0), 'x'.repeat(5000)]) {
        expect(classifyCredential(t), t.slice(0, 20)).to.equal('malformed');
      }
    });

    it('never throws (property)', () => {
      fc.assert(
        fc.property(fc.string({ unit: 'binary', maxLength: 500 }), (text) => {
          expect(['token', 'jwt', 'malformed']).to.include(classifyCredential(text));
        }),
      );
    });
  });

  describe('parseLoginBody', () => {
    it('accepts {user, password} strings and ignores other fields', () => {
      expect(parseLoginBody({ user: 'admin', password: 'pw', remember: true })).to.deep.equal({ user: 'admin', password: 'pw' });
    });

    it('refuses everything else with AuthBadRequestError (400)', () => {
      for (const body of [
        null,
        undefined,
        'admin:pw',
        [],
        {},
        { user: 'admin' },
        { user: 'admin', password: 1 },
        { user: '', password: 'pw' },
        { user: 'admin', password: '' },
        { user: 'a'.repeat(MAX_LOGIN_USER_LENGTH + 1), password: 'pw' },
        { user: 'admin', password: 'p'.repeat(MAX_LOGIN_PASSWORD_LENGTH + 1) },
      ]) {
        expect(() => parseLoginBody(body)).to.throw(AuthBadRequestError).with.property('code', 'EXITPOOL_INVALID_REQUEST');
      }
    });

    it('either returns bounded strings or throws AuthBadRequestError, for any input (property)', () => {
      const bodies = fc.oneof(
        fc.anything(),
        fc.record({ user: fc.anything(), password: fc.anything() }),
        fc.record({ user: fc.string({ maxLength: 200 }), password: fc.string({ maxLength: 1100 }) }),
      );
      fc.assert(
        fc.property(bodies, (body) => {
          try {
            const { user, password } = parseLoginBody(body);
            expect(user).to.be.a('string').with.length.within(1, MAX_LOGIN_USER_LENGTH);
            expect(password).to.be.a('string').with.length.within(1, MAX_LOGIN_PASSWORD_LENGTH);
          } catch (e) {
            expect(e).to.be.instanceOf(AuthBadRequestError);
          }
        }),
      );
    });
  });

  describe('parseTokenCreateBody', () => {
    it('accepts a name and a scope', () => {
      expect(parseTokenCreateBody({ name: 'fleet A', scope: 'admin' })).to.deep.equal({ name: 'fleet A', scope: 'admin' });
      expect(parseTokenCreateBody({ name: 'é'.repeat(MAX_TOKEN_NAME_LENGTH), scope: 'proxy' }).scope).to.equal('proxy');
    });

    it('refuses bad names and scopes', () => {
      for (const body of [
        null,
        { name: 'x' },
        { name: 'x', scope: 'root' },
        { name: '', scope: 'proxy' },
        { name: '   ', scope: 'proxy' },
        { name: 'a\u0007b', scope: 'proxy' },
        { name: 'a\u2028b', scope: 'proxy' },
        { name: 'a\u0085b', scope: 'proxy' },
        { name: 'x'.repeat(MAX_TOKEN_NAME_LENGTH + 1), scope: 'proxy' },
        { name: 7, scope: 'proxy' },
      ]) {
        expect(() => parseTokenCreateBody(body)).to.throw(AuthBadRequestError);
      }
    });

    it('either returns a valid request or throws AuthBadRequestError, for any input (property)', () => {
      fc.assert(
        fc.property(fc.oneof(fc.anything(), fc.record({ name: fc.string({ unit: 'binary', maxLength: 80 }), scope: fc.constantFrom('proxy', 'admin', 'x') })), (body) => {
          try {
            const parsed = parseTokenCreateBody(body);
            expect(['proxy', 'admin']).to.include(parsed.scope);
            expect(/\p{Cc}/u.test(parsed.name)).to.equal(false);
          } catch (e) {
            expect(e).to.be.instanceOf(AuthBadRequestError);
          }
        }),
      );
    });
  });
});
