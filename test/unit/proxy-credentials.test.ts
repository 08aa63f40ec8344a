import { expect } from 'chai';
import { createHash } from 'node:crypto';
import type { WorkerEndpoint } from '../../shared/ipc/protocol.js';
import { ProxyCredentials } from '../../workers/proxy-worker/proxy-credentials.js';

/** The worker's credential policy needs an endpoint only to receive snapshots; none arrives here. */
const endpoint = { handle: () => undefined } as unknown as WorkerEndpoint;
const SECRET = 'tf_fleet-secret-value';
const digest = createHash('sha256').update(SECRET).digest('hex');

describe('proxy worker credentials: the fleet forwarding secret', () => {
  it('recognises exactly the secret whose digest the supervisor passed, nothing else', () => {
    const policy = new ProxyCredentials(false, endpoint, digest).policy();
    expect(policy.isForwarded?.(SECRET)).to.equal(true);
    for (const other of [null, '', `${SECRET} `, SECRET.slice(0, -1), digest, SECRET.toUpperCase()]) expect(policy.isForwarded?.(other), String(other)).to.equal(false);
    // The secret is not a proxy token: the token check still fails closed on it.
    expect(policy.check('k', SECRET)).to.deep.equal({ ok: false });
  });

  it('recognises nothing outside a fleet, or with a digest that is not one', () => {
    for (const bad of [undefined, '', 'zz', digest.toUpperCase(), `${digest}00`]) {
      const policy = new ProxyCredentials(false, endpoint, bad).policy();
      expect(policy.isForwarded?.(SECRET), String(bad)).to.equal(false);
    }
  });
});
