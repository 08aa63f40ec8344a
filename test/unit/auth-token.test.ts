import { expect } from 'chai';
import { hasScope, type Principal, type Scope } from '../../shared/auth/principal.js';
import { isNewerSnapshot, type ProxyCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import { digestTokenSecret, ISSUED_TOKEN_SECRET_PATTERN, MAX_TOKEN_SECRET_LENGTH } from '../../shared/auth/token-format.js';
import { TokenVerifier } from '../../shared/auth/token-verifier.js';
import { generateAdminPassword, generateTokenId, generateTokenSecret } from '../../supervisor/auth/credential-generator.js';
import { randomBase62 } from '../../supervisor/auth/random-base62.js';

function snapshot(tokens: { id: string; scope: Scope; secret: string }[], authDisabled = false): ProxyCredentialSnapshot {
  return { version: 1, authDisabled, tokens: tokens.map((t) => ({ id: t.id, scope: t.scope, digest: digestTokenSecret(t.secret) })) };
}

describe('auth tokens', () => {
  describe('generation', () => {
    it('issues tp_ plus 22 base62 characters, all different', () => {
      const seen = new Set<string>();
      for (let i = 0; i < 2000; i++) {
        const secret = generateTokenSecret();
        expect(secret).to.match(ISSUED_TOKEN_SECRET_PATTERN);
        seen.add(secret);
      }
      expect(seen.size).to.equal(2000);
      expect(generateAdminPassword()).to.match(/^[A-Za-z0-9]{20}$/);
    });

    it('rejects bytes at or above 248 instead of folding them (no modulo bias)', () => {
      const script = [Buffer.from([255, 248, 0, 61, 62, 247, 250, 123])];
      const source = (size: number): Buffer => {
        const next = script.shift() ?? Buffer.alloc(size, 1);
        return next;
      };
      // 255 and 248 are dropped; 0→'0', 61→'z', 62→'0', 247→'z', 250 dropped, 123→'z'.
      expect(randomBase62(5, source)).to.equal('0z0zz');
    });

    it('draws every character about equally often', () => {
      const counts = new Map<string, number>();
      const text = randomBase62(124_000);
      for (const ch of text) counts.set(ch, (counts.get(ch) ?? 0) + 1);
      expect(counts.size).to.equal(62);
      for (const n of counts.values()) expect(n).to.be.within(1700, 2300);
    });

    it('never reuses a taken id', () => {
      const taken = new Set<string>();
      for (let i = 0; i < 500; i++) {
        const id = generateTokenId(taken);
        expect(id).to.match(/^[A-Za-z0-9]{10}$/);
        expect(taken.has(id)).to.equal(false);
        taken.add(id);
      }
    });
  });

  describe('verification', () => {
    const issued = generateTokenSecret();
    const legacy = 'tp_old-style_token-with_dashes-and_underscores';
    const admin = generateTokenSecret();
    const verifier = TokenVerifier.fromSnapshot(
      snapshot([
        { id: 'issued1', scope: 'proxy', secret: issued },
        { id: 'legacy1', scope: 'proxy', secret: legacy },
        { id: 'admin1', scope: 'admin', secret: admin },
      ]),
    );

    it('verifies issued and legacy (- and _) secrets by digest', () => {
      expect(verifier.verify(issued)).to.deep.equal({ id: 'issued1', scope: 'proxy' });
      expect(verifier.verify(legacy)).to.deep.equal({ id: 'legacy1', scope: 'proxy' });
      expect(verifier.verify(admin)).to.deep.equal({ id: 'admin1', scope: 'admin' });
    });

    it('refuses unknown, altered, prefix-less and over-long secrets', () => {
      expect(verifier.verify(generateTokenSecret())).to.equal(null);
      expect(verifier.verify(issued.slice(0, -1) + (issued.endsWith('a') ? 'b' : 'a'))).to.equal(null);
      expect(verifier.verify(issued + ' ')).to.equal(null);
      expect(verifier.verify('')).to.equal(null);
      // A stored digest of a secret without the prefix is never reached: the prefix is checked first.
      const bare = TokenVerifier.fromSnapshot(snapshot([{ id: 'bare', scope: 'admin', secret: 'no-prefix-secret' }]));
      expect(bare.verify('no-prefix-secret')).to.equal(null);
      const long = 'tp_' + 'a'.repeat(MAX_TOKEN_SECRET_LENGTH);
      expect(TokenVerifier.fromSnapshot(snapshot([{ id: 'long', scope: 'proxy', secret: long }])).verify(long)).to.equal(null);
    });

    it('admits proxy connections with either scope, none without a valid token', () => {
      expect(verifier.authenticateProxy(issued)).to.deep.equal({ ok: true, principal: { kind: 'token', id: 'issued1', scope: 'proxy' } });
      expect(verifier.authenticateProxy(admin)).to.deep.equal({ ok: true, principal: { kind: 'token', id: 'admin1', scope: 'admin' } });
      expect(verifier.authenticateProxy(undefined)).to.deep.equal({ ok: false, reason: 'missing' });
      expect(verifier.authenticateProxy('')).to.deep.equal({ ok: false, reason: 'missing' });
      expect(verifier.authenticateProxy('tp_nope')).to.deep.equal({ ok: false, reason: 'invalid' });
    });

    it('admits anything under AUTH_DISABLED', () => {
      const open = TokenVerifier.fromSnapshot(snapshot([], true));
      expect(open.authenticateProxy(null)).to.deep.equal({ ok: true, principal: { kind: 'anonymous-auth-disabled' } });
      expect(open.authenticateProxy('whatever')).to.deep.equal({ ok: true, principal: { kind: 'anonymous-auth-disabled' } });
    });

    // Its cost is the proxy benchmark's to measure (bench/, docs/performance.md), not a timed test's.
    it('verifies each of 1,000 tokens by its own digest, and no secret it was not given', () => {
      const many = Array.from({ length: 1000 }, (_, i) => ({ id: `t${i}`, scope: 'proxy' as const, secret: generateTokenSecret() }));
      const big = TokenVerifier.fromSnapshot(snapshot(many));
      expect(big.size).to.equal(1000);
      for (let i = 0; i < 10_000; i++) expect(big.verify(many[i % 1000]!.secret)).to.not.equal(null);
      expect(big.verify(generateTokenSecret())).to.equal(null);
    });

    it('orders snapshots by version', () => {
      expect(isNewerSnapshot(null, { version: 1 })).to.equal(true);
      expect(isNewerSnapshot({ version: 3 }, { version: 4 })).to.equal(true);
      expect(isNewerSnapshot({ version: 3 }, { version: 3 })).to.equal(false);
      expect(isNewerSnapshot({ version: 3 }, { version: 2 })).to.equal(false);
    });
  });

  describe('scopes', () => {
    const cases: [Principal, boolean, boolean][] = [
      [{ kind: 'token', id: 'a', scope: 'proxy' }, true, false],
      [{ kind: 'token', id: 'a', scope: 'admin' }, true, true],
      [{ kind: 'session', user: 'admin' }, true, true],
      [{ kind: 'ticket', user: 'admin' }, false, false],
      [{ kind: 'anonymous-auth-disabled' }, true, true],
    ];
    for (const [principal, proxy, admin] of cases) {
      it(`${principal.kind}${principal.kind === 'token' ? ` (${principal.scope})` : ''}: proxy ${proxy}, admin ${admin}`, () => {
        expect(hasScope(principal, 'proxy')).to.equal(proxy);
        expect(hasScope(principal, 'admin')).to.equal(admin);
      });
    }
  });
});
