import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import type { DestinationProbeResult } from '../../shared/ipc/protocol.js';
import { DESTINATION_FAULT_TTL_MS, DestinationBlame, MAX_CONCURRENT_PROBES, parseDestination, type Verdict } from '../../supervisor/verdicts/destination-blame.js';
import { destinationOf } from '../../workers/proxy/dial-failure.js';

const HOST_UNREACHABLE = 'reply:4';
const REFUSED = 'reply:5';

function rig(answer: (d: { host: string; port: number }) => DestinationProbeResult | null) {
  const clock = { t: 0 };
  const probes: { host: string; port: number; except: number }[] = [];
  const pending: (() => void)[] = [];
  const blame = new DestinationBlame(
    (d, except) => {
      probes.push({ ...d, except });
      return new Promise((resolve) => pending.push(() => resolve(answer(d))));
    },
    () => clock.t,
  );
  const verdicts: Verdict[] = [];
  const judge = (dest: string, reply = HOST_UNREACHABLE, instance = 0): void => blame.judge(dest, reply, instance, (v) => verdicts.push(v));
  const answerAll = async (): Promise<void> => {
    for (const p of pending.splice(0)) p();
    await new Promise((r) => setImmediate(r));
  };
  return { blame, clock, probes, verdicts, judge, answerAll };
}

describe('destination blame', () => {
  it('blames the destination when it fails the same way through another exit, and remembers it', async () => {
    const r = rig(() => ({ ok: false, socksReply: 4 }));
    r.judge('no-such.invalid:80', HOST_UNREACHABLE, 2);
    r.judge('no-such.invalid:80', HOST_UNREACHABLE, 2); // joins the running check
    expect(r.probes).to.deep.equal([{ host: 'no-such.invalid', port: 80, except: 2 }]);
    await r.answerAll();
    expect(r.verdicts).to.deep.equal(['destination', 'destination']);
    r.judge('no-such.invalid:80');
    expect(r.verdicts.at(-1), 'known: no new check').to.equal('destination');
    expect(r.probes).to.have.lengthOf(1);
    r.clock.t = DESTINATION_FAULT_TTL_MS + 1;
    r.judge('no-such.invalid:80');
    expect(r.probes, 'forgotten after the TTL: checked again').to.have.lengthOf(2);
  });

  it('blames the exit only when the destination works elsewhere; a different failure, or nobody to check, is unknown', async () => {
    const works = rig(() => ({ ok: true, socksReply: null }));
    works.judge('example.com:443', REFUSED);
    await works.answerAll();
    const differs = rig(() => ({ ok: false, socksReply: 5 }));
    differs.judge('example.com:443', HOST_UNREACHABLE);
    await differs.answerAll();
    const nobody = rig(() => null);
    nobody.judge('example.com:443');
    await nobody.answerAll();
    expect([...works.verdicts, ...differs.verdicts, ...nobody.verdicts]).to.deep.equal(['exit', 'unknown', 'unknown']);
  });

  it('reads a check that timed out too as the same failure as a timeout', async () => {
    const r = rig(() => ({ ok: false, socksReply: null }));
    r.judge('slow.example:443', 'timeout');
    await r.answerAll();
    expect(r.verdicts).to.deep.equal(['destination']);
  });

  it(`blames nobody (unknown) beyond ${MAX_CONCURRENT_PROBES} checks at a time, or for a malformed destination: a flood cannot burn an exit`, async () => {
    const r = rig(() => ({ ok: false, socksReply: 4 }));
    for (let i = 0; i <= MAX_CONCURRENT_PROBES; i++) r.judge(`host${i}.invalid:80`);
    r.judge('not a destination');
    expect(r.probes).to.have.lengthOf(MAX_CONCURRENT_PROBES);
    expect(r.verdicts).to.deep.equal(['unknown', 'unknown']);
    await r.answerAll();
    expect(r.verdicts.filter((v) => v === 'destination')).to.have.lengthOf(MAX_CONCURRENT_PROBES);
  });

  it('decides every failure exactly once, whatever the interleaving (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('a.invalid:80', 'b.invalid:443', '[::1]:80', 'bad'), fc.constantFrom(HOST_UNREACHABLE, REFUSED), fc.boolean()), { maxLength: 30 }), async (steps) => {
        const r = rig((d) => ({ ok: false, socksReply: d.port === 80 ? 4 : 5 }));
        let expected = 0;
        for (const [dest, reply, answerNow] of steps) {
          r.judge(dest, reply);
          expected++;
          if (answerNow) await r.answerAll();
        }
        await r.answerAll();
        return r.verdicts.length === expected;
      }),
    );
  });

  it('writes destinations the way it reads them back, IPv6 bracketed (property)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.domain(), fc.ipV4(), fc.ipV6()), fc.integer({ min: 1, max: 65535 }), (host, port) => {
        const type = host.includes(':') ? 'ipv6' : /^\d+\.\d+\.\d+\.\d+$/.test(host) ? 'ipv4' : 'domain';
        const parsed = parseDestination(destinationOf({ type, host, port }));
        return parsed !== undefined && parsed.port === port && parsed.host.replace(/^\[(.*)\]$/, '$1') === host.toLowerCase();
      }),
    );
    for (const bad of ['', ':80', 'host:', 'host:0', 'host:70000', '::1:80', 'a'.repeat(300) + ':80']) expect(parseDestination(bad), bad).to.equal(undefined);
  });
});
