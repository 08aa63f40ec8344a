import { expect } from 'chai';
import fc from 'fast-check';
import { REFUSAL_REPLIES } from '../../shared/api/route-refusal.js';
import type { RouteRefusal, RouteResult } from '../../shared/ipc/protocol.js';
import { RECENT_REFUSAL_TTL_MS, RecentRefusals } from '../../supervisor/routing/recent-refusals.js';
import { routeRefusedResponse } from '../../workers/proxy/http-proxy-errors.js';
import { socksReplyForRefusal } from '../../workers/proxy/socks5-server.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

const granted: RouteResult = { ok: true, instance: 0, host: '127.0.0.1', port: 1, key: 'k', session: 1, lease: true, exitIp: '' };
const refused = (reason: RouteRefusal, detail?: string): RouteResult => ({ ok: false, reason, ...(detail === undefined ? {} : { detail }) });

describe('recent route refusals (GET /api/sessions/{key}/refusal)', () => {
  it('keeps the last refusal of a key with its age, hands every result on unchanged, and forgets it after the TTL', async () => {
    const clock = { now: 1_000_000 };
    const r = new RecentRefusals(() => clock.now);
    const no = refused('no_exit_in_country', 'no exit in zz: none in the exit catalog');
    expect(r.note('shop', no)).to.equal(no);
    expect(r.note('shop', granted), 'a grant is handed on and leaves the refusal').to.equal(granted);
    expect(r.note(null, refused('no_routable_instance')), 'no key, nothing kept').to.deep.equal(refused('no_routable_instance'));
    clock.now += 40;
    expect(r.view('shop')).to.deep.equal({
      session: 'shop',
      refusal: {
        reason: 'no_exit_in_country',
        detail: 'no exit in zz: none in the exit catalog',
        at: new Date(1_000_000).toISOString(),
        age_ms: 40,
        http_status: 503,
        proxy_status_error: 'destination_unavailable',
        socks_reply: 3,
      },
    });
    expect(r.view('never'), 'an unknown key is told apart from nothing').to.deep.equal({ session: 'never', refusal: null });
    const later = Promise.resolve(refused('session_limit'));
    expect(r.note('shop', later), 'a promise is handed on as it is').to.equal(later);
    await later;
    await Promise.resolve();
    expect(r.view('shop').refusal?.reason, 'the newest refusal wins').to.equal('session_limit');
    clock.now += RECENT_REFUSAL_TTL_MS + 1;
    expect(r.view('shop').refusal).to.equal(null);
    expect(r.size).to.equal(0);
  });

  it('property: never holds more than its bound of keys, and the newest ones stay', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[a-z]{1,3}$/), { maxLength: 200 }), fc.integer({ min: 1, max: 20 }), (keys, max) => {
        const r = new RecentRefusals(() => 0, RECENT_REFUSAL_TTL_MS, max);
        for (const k of keys) r.note(k, refused('no_routable_instance'));
        expect(r.size).to.be.at.most(max);
        const newest = [...new Set([...keys].reverse())].slice(0, max);
        for (const k of newest) expect(r.view(k).refusal, k).to.not.equal(null);
      }),
      { numRuns: fuzzRuns(100) },
    );
  });

  it('says what each listener answered: the proxy worker’s own mapping, reason by reason', () => {
    for (const reason of Object.keys(REFUSAL_REPLIES) as RouteRefusal[]) {
      const reply = REFUSAL_REPLIES[reason];
      const http = routeRefusedResponse(reason, 'the supervisor’s words');
      expect({ status: http.status, error: http.error }, reason).to.deep.equal({ status: reply.httpStatus, error: reply.proxyStatusError });
      expect(http.message, reason).to.equal(reply.keepsDetail ? 'the supervisor’s words' : reply.defaultDetail);
      expect(routeRefusedResponse(reason).message, reason).to.equal(reply.defaultDetail);
      expect(socksReplyForRefusal(reason), reason).to.equal(reply.socksReply);
    }
  });
});
