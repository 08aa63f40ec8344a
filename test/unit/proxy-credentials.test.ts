/**
 * The proxy worker's two credential checks: the clients' listeners take proxy tokens only (a hop
 * credential is refused there), and the hop listener takes hop credentials only (a proxy token is
 * refused there), each signed for this node, the session the username names and a current window,
 * carrying a credential this node admits now.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { hopPassword, hopWindow, HOP_WINDOW_MS, sessionHopKey, type HopGrant } from '../../shared/auth/hop-credential.js';
import type { ProxyCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import { digestTokenSecret } from '../../shared/auth/token-format.js';
import type { HopKeySnapshot, WorkerEndpoint } from '../../shared/ipc/protocol.js';
import { HopCredentials } from '../../workers/proxy-worker/hop-credentials.js';
import { ProxyCredentials } from '../../workers/proxy-worker/proxy-credentials.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

/** The policies need an endpoint only to receive updates; none arrives here. */
const endpoint = { handle: () => undefined } as unknown as WorkerEndpoint;
const TOKEN = 'tp_ProxyTokenForHopTests0001';
const NOW = 1_800_000_000_000;
const key = { id: 'AAAAAAAAAAAA', secret: randomBytes(32).toString('base64url') };
const keys: HopKeySnapshot = { version: 1, node: 'owner', keys: [key] };
const snapshot: ProxyCredentialSnapshot = { version: 1, authDisabled: false, tokens: [{ id: 'tok1', scope: 'proxy', digest: digestTokenSecret(TOKEN) }] };

function tokens(authDisabled = false): ProxyCredentials {
  const t = new ProxyCredentials(authDisabled, endpoint);
  t.install({ ...snapshot, authDisabled });
  return t;
}

function grant(o: { from?: string; to?: string; session?: string; at?: number; secret?: string; keyId?: string } = {}): HopGrant {
  const window = hopWindow(o.at ?? NOW);
  const from = o.from ?? 'forwarder';
  return { from, window, keyId: o.keyId ?? key.id, key: sessionHopKey(o.secret ?? key.secret, { from, to: o.to ?? 'owner', sessionKey: o.session ?? 'crawl-1', window }).toString('base64url') };
}

function hop(o: { authDisabled?: boolean; usernameParams?: boolean; now?: number } = {}): ReturnType<HopCredentials['policy']> {
  return new HopCredentials(keys, tokens(o.authDisabled), o.usernameParams ?? true, endpoint, () => o.now ?? NOW).policy();
}

describe('proxy worker credentials: the clients’ listeners and the hop listener', () => {
  it('the clients’ listeners take a proxy token and never a hop credential', () => {
    const clients = tokens().policy();
    expect(clients.check('crawl-1', TOKEN)).to.deep.equal({ ok: true, credential: 'token:tok1' });
    expect(clients.check('crawl-1', hopPassword(grant(), 'token:tok1'))).to.deep.equal({ ok: false });
  });

  it('the hop listener takes a hop credential made for it, and never a proxy token', () => {
    const policy = hop();
    expect(policy.required).to.equal(true);
    expect(policy.check('crawl-1', hopPassword(grant(), 'token:tok1'))).to.deep.equal({ ok: true, credential: 'token:tok1' });
    // The username's parameters are not part of the session key (USERNAME_PARAMS): the same credential.
    expect(policy.check('crawl-1-country-de', hopPassword(grant(), 'token:tok1'))).to.deep.equal({ ok: true, credential: 'token:tok1' });
    expect(policy.check('crawl-1', TOKEN)).to.deep.equal({ ok: false });
    expect(policy.check(null, hopPassword(grant(), 'token:tok1'))).to.deep.equal({ ok: false });
  });

  it('refuses a hop credential for another session, owner, key, or a window too far', () => {
    const policy = hop();
    const cases: [string, string][] = [
      ['another session', hopPassword(grant({ session: 'crawl-2' }), 'token:tok1')],
      ['another owner', hopPassword(grant({ to: 'elsewhere' }), 'token:tok1')],
      ['an unknown key id', hopPassword(grant({ keyId: 'BBBBBBBBBBBB' }), 'token:tok1')],
      ['a key this node never had', hopPassword(grant({ secret: randomBytes(32).toString('base64url') }), 'token:tok1')],
      ['two windows ago', hopPassword(grant({ at: NOW - 2 * HOP_WINDOW_MS }), 'token:tok1')],
      ['two windows ahead', hopPassword(grant({ at: NOW + 2 * HOP_WINDOW_MS }), 'token:tok1')],
    ];
    for (const [label, password] of cases) expect(policy.check('crawl-1', password), label).to.deep.equal({ ok: false });
    // One window either side is taken: two nodes' clocks differ a little.
    expect(policy.check('crawl-1', hopPassword(grant({ at: NOW - HOP_WINDOW_MS }), 'token:tok1')).ok).to.equal(true);
  });

  it('refuses a hop carrying a token this node does not hold (revoked), or an address unless AUTH_DISABLED here', () => {
    expect(hop().check('crawl-1', hopPassword(grant(), 'token:revoked1'))).to.deep.equal({ ok: false });
    expect(hop().check('crawl-1', hopPassword(grant(), 'address:10.0.0.7'))).to.deep.equal({ ok: false });
    expect(hop({ authDisabled: true }).check('crawl-1', hopPassword(grant(), 'address:10.0.0.7'))).to.deep.equal({ ok: true, credential: 'address:10.0.0.7' });
  });

  it('a new key snapshot replaces the old one (an older one is ignored)', () => {
    let update: ((s: HopKeySnapshot) => unknown) | undefined;
    const capture = { handle: (_m: string, h: (s: HopKeySnapshot) => unknown) => (update = h) } as unknown as WorkerEndpoint;
    const credentials = new HopCredentials(keys, tokens(), true, capture, () => NOW);
    const next = { id: 'CCCCCCCCCCCC', secret: randomBytes(32).toString('base64url') };
    update?.({ version: 2, node: 'owner', keys: [next] });
    update?.({ version: 1, node: 'owner', keys: [key] });
    const policy = credentials.policy();
    expect(policy.check('crawl-1', hopPassword(grant({ keyId: next.id, secret: next.secret }), 'token:tok1')).ok).to.equal(true);
    expect(policy.check('crawl-1', hopPassword(grant(), 'token:tok1')).ok, 'the dropped key').to.equal(false);
  });

  it('property: a credential with any character changed is refused, and random passwords never pass', () => {
    const policy = hop();
    const good = hopPassword(grant(), 'token:tok1');
    fc.assert(
      fc.property(fc.nat({ max: good.length - 1 }), fc.constantFrom(...'ABCabc012_-~:.'.split('')), (at, c) => {
        const changed = good.slice(0, at) + c + good.slice(at + 1);
        if (changed !== good) expect(policy.check('crawl-1', changed).ok).to.equal(false);
      }),
      { numRuns: fuzzRuns(500) },
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 255 }), fc.string({ minLength: 1, maxLength: 255 }), (password, username) => {
        expect(policy.check(username, password).ok).to.equal(false);
      }),
      { numRuns: fuzzRuns(500) },
    );
  });
});
