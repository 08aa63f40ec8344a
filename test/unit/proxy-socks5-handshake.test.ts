import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import type { CredentialCheck } from '../../workers/proxy/proxy-types.js';
import { Socks5ServerHandshake, type HandshakeAuthMode, type HandshakeStep } from '../../workers/proxy/socks5-handshake.js';
import { encodeGreeting, encodeRequest, encodeUserPasswordRequest, type Socks5Target } from '../../workers/proxy/socks5-protocol.js';

const VALID_TOKEN = 'tp_valid';
const tokenCheck: CredentialCheck = (_user, password) => (password === VALID_TOKEN ? { ok: true, credential: 'token:test' } : { ok: false });
const target: Socks5Target = { type: 'domain', host: 'example.com', port: 443 };

function run(mode: HandshakeAuthMode, input: Buffer, check: CredentialCheck = tokenCheck): HandshakeStep[] {
  return new Socks5ServerHandshake(mode, check).feed(input);
}

function sent(steps: HandshakeStep[]): number[] {
  return steps.flatMap((step) => (step.type === 'send' ? [...step.bytes] : []));
}

function terminal(steps: HandshakeStep[]): HandshakeStep | undefined {
  return steps.find((step) => step.type === 'connect' || step.type === 'close');
}

/** Feeds `input` split at `cuts`, stopping once the machine finishes; returns steps and the unfed remainder. */
function feedChunked(machine: Socks5ServerHandshake, input: Buffer, cuts: number[]): { steps: HandshakeStep[]; unfed: Buffer } {
  const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
  const steps: HandshakeStep[] = [];
  let from = 0;
  for (const point of [...points, input.length]) {
    if (machine.finished) break;
    steps.push(...machine.feed(input.subarray(from, point)));
    from = point;
  }
  return { steps, unfed: input.subarray(from) };
}

/** Steps in a comparable form: sends merged, connect's rest plus anything not fed. */
function normalise(steps: HandshakeStep[], unfed: Buffer): unknown {
  const out: unknown[] = [];
  let bytes: number[] = [];
  for (const step of steps) {
    if (step.type === 'send') {
      bytes.push(...step.bytes);
      continue;
    }
    out.push({ sent: bytes });
    bytes = [];
    if (step.type === 'authenticated') out.push({ authenticated: step.sessionKey });
    else if (step.type === 'connect') out.push({ connect: step.target, key: step.sessionKey, rest: [...Buffer.concat([step.rest, unfed])] });
    else out.push({ close: step.refusal.kind, code: step.refusal.kind === 'protocol-error' ? step.refusal.error.code : null });
  }
  out.push({ sent: bytes });
  return out;
}

describe('proxy: SOCKS5 server handshake', () => {
  describe('credentials required', () => {
    it('selects username/password and accepts a valid token, the username becoming the session key', () => {
      const input = Buffer.concat([encodeGreeting([0, 2]), encodeUserPasswordRequest('alice', VALID_TOKEN), encodeRequest('connect', target), Buffer.from('early')]);
      const steps = run('required', input);
      expect(sent(steps)).to.deep.equal([5, 2, 1, 0]);
      expect(terminal(steps)).to.deep.include({ type: 'connect', target, sessionKey: 'alice' });
      const connect = terminal(steps) as HandshakeStep & { type: 'connect' };
      expect(connect.rest.toString()).to.equal('early');
    });

    it('refuses a client that offers no username/password method with 0xFF', () => {
      const steps = run('required', encodeGreeting([0]));
      expect(sent(steps)).to.deep.equal([5, 0xff]);
      expect(terminal(steps)).to.deep.include({ type: 'close' });
    });

    it('refuses a bad token with RFC 1929 status 1 and closes', () => {
      const steps = run('required', Buffer.concat([encodeGreeting([2]), encodeUserPasswordRequest('alice', 'tp_wrong')]));
      expect(sent(steps)).to.deep.equal([5, 2, 1, 1]);
      expect(terminal(steps)).to.deep.equal({ type: 'close', refusal: { kind: 'credential-refused', usernamePresent: true } });
    });

    it('passes empty username and password to the check as null', () => {
      const seen: Array<[string | null, string | null]> = [];
      run('required', Buffer.concat([encodeGreeting([2]), encodeUserPasswordRequest('', '')]), (user, pass) => {
        seen.push([user, pass]);
        return { ok: false };
      });
      expect(seen).to.deep.equal([[null, null]]);
    });

    it('accepts a token with an empty username: the pool applies DEFAULT_SESSION', () => {
      const steps = run('required', Buffer.concat([encodeGreeting([2]), encodeUserPasswordRequest('', VALID_TOKEN), encodeRequest('connect', target)]));
      expect(terminal(steps)).to.deep.include({ type: 'connect', sessionKey: null });
    });
  });

  describe('AUTH_DISABLED and session ports', () => {
    it('lets a no-auth client through with no session key when credentials are optional', () => {
      const steps = run('optional', Buffer.concat([encodeGreeting([0]), encodeRequest('connect', target)]));
      expect(sent(steps)).to.deep.equal([5, 0]);
      expect(terminal(steps)).to.deep.include({ type: 'connect', sessionKey: null });
    });

    it('still takes the username as session key when optional, without checking the password', () => {
      let checked = false;
      const steps = run('optional', Buffer.concat([encodeGreeting([0, 2]), encodeUserPasswordRequest('bob', 'anything'), encodeRequest('connect', target)]), () => {
        checked = true;
        return { ok: false };
      });
      expect(checked).to.equal(false);
      expect(sent(steps)).to.deep.equal([5, 2, 1, 0]);
      expect(terminal(steps)).to.deep.include({ type: 'connect', sessionKey: 'bob' });
    });

    it('reads and discards a username on a session port', () => {
      const steps = run('ignored', Buffer.concat([encodeGreeting([2]), encodeUserPasswordRequest('bob', 'x'), encodeRequest('connect', target)]));
      expect(terminal(steps)).to.deep.include({ type: 'connect', sessionKey: null });
    });
  });

  describe('requests', () => {
    for (const command of ['bind', 'udp-associate'] as const) {
      it(`answers ${command} with a full reply 7 (command not supported) and closes`, () => {
        const steps = run('optional', Buffer.concat([encodeGreeting([0]), encodeRequest(command, target)]));
        expect(sent(steps)).to.deep.equal([5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
        expect(terminal(steps)).to.deep.equal({ type: 'close', refusal: { kind: 'command-not-supported', command } });
      });
    }

    it('answers an unknown address type with reply 8', () => {
      const steps = run('optional', Buffer.concat([encodeGreeting([0]), Buffer.from([5, 1, 0, 9, 0, 0])]));
      expect(sent(steps).slice(2, 4)).to.deep.equal([5, 8]);
    });

    it('ignores input after a terminal step', () => {
      const machine = new Socks5ServerHandshake('optional', tokenCheck);
      machine.feed(Buffer.concat([encodeGreeting([0]), encodeRequest('connect', target)]));
      expect(machine.finished).to.equal(true);
      expect(machine.feed(Buffer.from('more'))).to.deep.equal([]);
    });
  });

  describe('properties', () => {
    const modeArb = fc.constantFrom<HandshakeAuthMode>('required', 'optional', 'ignored');
    const validishArb = fc
      .record({
        methods: fc.subarray([0, 1, 2, 3], { minLength: 0 }),
        user: fc.string({ maxLength: 8 }),
        token: fc.constantFrom(VALID_TOKEN, 'tp_bad', ''),
        command: fc.constantFrom('connect' as const, 'bind' as const),
        tail: fc.uint8Array({ maxLength: 16 }),
      })
      .map(({ methods, user, token, command, tail }) =>
        Buffer.concat([encodeGreeting(methods), encodeUserPasswordRequest(user, token), encodeRequest(command, target), Buffer.from(tail)]),
      );
    const inputArb = fc.oneof(validishArb, fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)));

    it('behaves the same whether bytes arrive whole or split at arbitrary boundaries', () => {
      fc.assert(
        fc.property(modeArb, inputArb, fc.array(fc.nat(), { maxLength: 12 }), (mode, input, cuts) => {
          const whole = feedChunked(new Socks5ServerHandshake(mode, tokenCheck), input, []);
          const chunked = feedChunked(new Socks5ServerHandshake(mode, tokenCheck), input, cuts);
          expect(normalise(chunked.steps, chunked.unfed)).to.deep.equal(normalise(whole.steps, whole.unfed));
        }),
        { numRuns: fuzzRuns(1500) },
      );
    });

    it('behaves the same when fed one byte at a time', () => {
      fc.assert(
        fc.property(modeArb, inputArb, (mode, input) => {
          const whole = feedChunked(new Socks5ServerHandshake(mode, tokenCheck), input, []);
          const bytewise = feedChunked(new Socks5ServerHandshake(mode, tokenCheck), input, [...Array(input.length).keys()]);
          expect(normalise(bytewise.steps, bytewise.unfed)).to.deep.equal(normalise(whole.steps, whole.unfed));
        }),
        { numRuns: fuzzRuns(500) },
      );
    });

    it('never throws on arbitrary bytes and ends in at most one terminal step', () => {
      fc.assert(
        fc.property(modeArb, fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 10 }), (mode, chunks) => {
          const machine = new Socks5ServerHandshake(mode, tokenCheck);
          const steps = chunks.flatMap((chunk) => machine.feed(Buffer.from(chunk)));
          expect(steps.filter((step) => step.type === 'connect' || step.type === 'close').length).to.be.at.most(1);
        }),
        { numRuns: fuzzRuns(1500) },
      );
    });

    it('announces the settled session key once, before any CONNECT, and the CONNECT carries the same key', () => {
      // The listener routes on 'authenticated' while the request is in flight: a CONNECT without
      // it, or with another key, would be dialled through a route made for someone else.
      fc.assert(
        fc.property(modeArb, inputArb, fc.array(fc.nat(), { maxLength: 6 }), (mode, input, cuts) => {
          const { steps } = feedChunked(new Socks5ServerHandshake(mode, tokenCheck), input, cuts);
          const announced = steps.filter((step) => step.type === 'authenticated');
          expect(announced.length).to.be.at.most(1);
          const connectAt = steps.findIndex((step) => step.type === 'connect');
          if (connectAt < 0) return;
          const connect = steps[connectAt] as Extract<HandshakeStep, { type: 'connect' }>;
          const announcedAt = steps.findIndex((step) => step.type === 'authenticated');
          expect(announcedAt).to.be.within(0, connectAt - 1);
          expect((announced[0] as Extract<HandshakeStep, { type: 'authenticated' }>).sessionKey).to.equal(connect.sessionKey);
          if (mode === 'ignored') expect(connect.sessionKey).to.equal(null);
        }),
        { numRuns: fuzzRuns(500) },
      );
    });
  });
});
