/**
 * Issue 14, finding 8c on the real service: failed sign-ins from one address cannot lock the
 * right password out with no way through, and killing the API worker does not reset the count.
 * On 0.1.0 the count lived in the API worker (a SIGKILL reset it) and was per address only, so
 * a guesser at the operator's address locked the operator out for the whole window.
 */
import { expect } from 'chai';
import { DEVICE_COOKIE_NAME } from '../../workers/api/auth/device-cookie.js';
import { serviceWorkers, signal } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { TEST_ADMIN_PASSWORD, withService } from '../support/fixtures/service.js';

const ATTEMPTS = 3;

describe('sign-in limits that leave the operator a way in', function () {
  this.timeout(240_000);

  const suite = withService({ POOL_SIZE: '1', LOGIN_RATE_LIMIT: `${ATTEMPTS}/10m` }, { ready: 1, readyTimeoutMs: 120_000 });

  const signIn = (password: string, cookie?: string): Promise<Response> =>
    suite.svc.api('/api/auth/login', { method: 'POST', body: { user: 'admin', password }, ...(cookie === undefined ? {} : { headers: { Cookie: cookie } }) });

  it('keeps the count across an API worker restart, and lets a browser that signed in before through', async () => {
    // The operator's browser signed in once: it holds a device cookie.
    const first = await signIn(TEST_ADMIN_PASSWORD);
    expect(first.status).to.equal(200);
    const setCookie = first.headers.get('set-cookie') ?? '';
    expect(setCookie).to.match(new RegExp(`^${DEVICE_COOKIE_NAME}=`));
    expect(setCookie).to.contain('HttpOnly').and.to.contain('SameSite=Strict');
    const deviceCookie = setCookie.split(';')[0]!;

    // A guesser at the same address (no cookie) uses up the budget of admin at this address.
    for (let i = 0; i < ATTEMPTS; i++) expect((await signIn(`guess-${i}`)).status).to.equal(401);
    const locked = await signIn(TEST_ADMIN_PASSWORD);
    expect(locked.status).to.equal(429);
    expect(Number(locked.headers.get('retry-after'))).to.be.greaterThan(0);

    // Killing the API worker does not give the guesser a fresh budget.
    const [apiPid] = serviceWorkers(suite.svc.pid).api;
    expect(apiPid).to.be.a('number');
    expect(signal(apiPid!, 'SIGKILL')).to.equal(true);
    await pollUntil('a new API worker answering', async () => {
      const pids = serviceWorkers(suite.svc.pid).api;
      if (pids.length !== 1 || pids[0] === apiPid) return undefined;
      try {
        return (await suite.svc.api('/api/auth/status')).status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    }, 30_000);
    expect((await signIn(TEST_ADMIN_PASSWORD)).status, 'still limited after the worker restart').to.equal(429);

    // The operator's browser gets in with the right password; its cookie does not open guessing.
    const operator = await signIn(TEST_ADMIN_PASSWORD, deviceCookie);
    expect(operator.status).to.equal(200);
    const token = ((await operator.json()) as { token: string }).token;
    expect((await suite.svc.api('/api/pool', { bearer: token })).status).to.equal(200);
    expect((await signIn('wrong', 'exitpool_device=forged.1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).to.equal(429);
  });
});
