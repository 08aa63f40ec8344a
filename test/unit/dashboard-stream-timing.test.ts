import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { STABLE_CONNECTION_MS, STREAM_BACKOFF, afterLoss, reconnectDelayMs } from '../../dashboard/src/logic/backoff.js';
import { describeStreamStatus } from '../../dashboard/src/logic/stream-status.js';
import {
  TICKET_SAFETY_MARGIN_MS,
  streamUrl,
  ticketExpiresAtMs,
  ticketRenewDelayMs,
  ticketUsable,
} from '../../dashboard/src/logic/ticket-schedule.js';

describe('dashboard live stream timing', () => {
  describe('reconnect backoff', () => {
    it('doubles from one second and stops at thirty', () => {
      // random = 1 gives the nominal (upper) delay.
      expect([0, 1, 2, 3, 4, 5, 6, 20].map((n) => reconnectDelayMs(n, 1))).to.deep.equal([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    });

    it('jitters within [cap/2, cap] and never below half a second (property)', () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 100 }), fc.double({ min: 0, max: 1, noNaN: true }), (failures, r) => {
          const cap = Math.min(STREAM_BACKOFF.maxMs, STREAM_BACKOFF.baseMs * 2 ** Math.min(failures, 30));
          const d = reconnectDelayMs(failures, r);
          expect(d).to.be.at.least(Math.floor(cap / 2)).and.at.most(cap);
          expect(d).to.be.at.least(500);
        }),
      );
    });

    it('keeps climbing while connections die young, and starts over after a stable one', () => {
      let failures = 0;
      const delays: number[] = [];
      for (let i = 0; i < 4; i++) {
        const next = afterLoss(failures, i === 0 ? null : 200, 1);
        delays.push(next.delayMs);
        failures = next.failures;
      }
      expect(delays).to.deep.equal([1000, 2000, 4000, 8000]);
      const reset = afterLoss(failures, STABLE_CONNECTION_MS, 1);
      expect(reset).to.deep.equal({ delayMs: 1000, failures: 1 });
    });
  });

  describe('ticket renewal', () => {
    it('renews a 60-second ticket at 45 s, before the safety margin', () => {
      expect(ticketRenewDelayMs(60)).to.equal(45_000);
      expect(ticketRenewDelayMs(60)).to.be.below(60_000 - TICKET_SAFETY_MARGIN_MS + 1);
    });

    it('always renews before expiry and never in a tight loop (property)', () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 86_400 }), (secs) => {
          const d = ticketRenewDelayMs(secs);
          expect(d).to.be.at.least(1000);
          if (secs * 1000 > TICKET_SAFETY_MARGIN_MS + 1000) expect(d).to.be.at.most(secs * 1000 - TICKET_SAFETY_MARGIN_MS);
        }),
      );
    });

    it('stops presenting a ticket shortly before it expires', () => {
      const t = { ticket: 'x', obtainedAtMs: 1_000_000, expiresInSecs: 60 };
      expect(ticketExpiresAtMs(t)).to.equal(1_060_000);
      expect(ticketUsable(t, 1_000_000)).to.equal(true);
      expect(ticketUsable(t, 1_060_000 - TICKET_SAFETY_MARGIN_MS - 1)).to.equal(true);
      expect(ticketUsable(t, 1_060_000 - TICKET_SAFETY_MARGIN_MS)).to.equal(false);
      expect(ticketUsable(null, 0)).to.equal(false);
    });

    it('puts the ticket in the stream URL, encoded', () => {
      expect(streamUrl('a.b_c-d')).to.equal('/api/stream?ticket=a.b_c-d');
      expect(streamUrl('a+b/c=')).to.equal('/api/stream?ticket=a%2Bb%2Fc%3D');
    });
  });

  it('describes the stream state for the header', () => {
    expect(describeStreamStatus({ kind: 'live' }, 0)).to.equal('live');
    expect(describeStreamStatus({ kind: 'paused' }, 0)).to.equal('paused (tab hidden)');
    expect(describeStreamStatus({ kind: 'retrying', atMs: 4_500, reason: 'x' }, 1_000)).to.equal('reconnecting in 4s');
    expect(describeStreamStatus({ kind: 'retrying', atMs: 1_000, reason: 'x' }, 2_000)).to.equal('reconnecting…');
    expect(describeStreamStatus({ kind: 'refused', reason: 'not allowed' }, 0)).to.equal('not allowed');
  });
});
