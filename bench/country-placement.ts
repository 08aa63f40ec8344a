/**
 * Placement by country on the real service (private Tor network, pool of 3): how long the first
 * request of a session asking for a country no instance serves waits while an instance is given
 * an exit there, next to a request whose country is served already, in the same run.
 */
import type { InstanceView } from '../shared/api/views.js';
import { COUNTRY_EXIT_WAIT_MS } from '../shared/config/limits.js';
import { startService } from '../test/support/fixtures/service.js';
import { ms, percentile, type BenchSection } from './report.js';
import { exitOf } from './session-rotation.js';

export interface CountryBenchOptions {
  /** First requests timed, each for a country no instance serves at that moment. */
  samples: number;
}

export const FULL_COUNTRY_OPTIONS: CountryBenchOptions = { samples: 12 };

export async function benchCountryPlacement(o: CountryBenchOptions = FULL_COUNTRY_OPTIONS): Promise<BenchSection> {
  const svc = await startService({ POOL_SIZE: '3', LOG_LEVEL: 'warn' });
  try {
    await svc.waitReady(3, 180_000);
    const jwt = await svc.login();
    // The countries sites see the exits in (GeoIP of the address their traffic leaves from).
    const countries = [...new Set(svc.net.exits.map((e) => e.egressCountry))];
    const served = async (): Promise<string[]> =>
      ((await (await svc.api('/api/instances', { bearer: jwt })).json()) as InstanceView[]).map((i) => i.assigned_exit?.country ?? '');
    const waits: number[] = [];
    const baseline: number[] = [];
    for (let i = 0; i < o.samples; i++) {
      const now = await served();
      const target = countries.find((c) => !now.includes(c));
      const present = countries.find((c) => now.includes(c));
      if (target === undefined || present === undefined) throw new Error(`no unserved country among ${countries.join(', ')}`);
      let t = performance.now();
      await exitOf(svc, `served-${i}-country-${present}`);
      baseline.push(performance.now() - t);
      t = performance.now();
      await exitOf(svc, `first-${i}-country-${target}`);
      waits.push(performance.now() - t);
      // Idle instances again: a busy one is reassigned at most once per BUSY_REASSIGNMENT_INTERVAL_MS.
      for (const key of [`served-${i}`, `first-${i}`]) await svc.api(`/api/sessions/${key}`, { method: 'DELETE', bearer: jwt });
    }
    waits.sort((a, b) => a - b);
    baseline.sort((a, b) => a - b);
    const p50 = percentile(waits, 0.5);
    const max = waits[waits.length - 1] as number;
    return {
      title: 'Placement by country: the first request when an instance must be given an exit there',
      method:
        `Pool of 3 on the private network (8 exits in 5 countries, by the address their traffic leaves from). ${o.samples} times: a request of a session asking for a country some instance serves ` +
        '(baseline), then the first request of a session asking for one no instance serves, which waits while an idle instance is pinned to an exit there ' +
        '(SETCONF ExitNodes, a circuit through it) and then goes through; both are plain HTTP through the SOCKS5 listener, timed to the whole answer; both sessions are deleted after each round.',
      figures: [
        { name: 'request, country already served (p50 / max)', value: `${ms(percentile(baseline, 0.5), 1)} / ${ms(baseline[baseline.length - 1] as number, 1)}`, limit: '', withinLimit: null },
        { name: 'first request, exit assigned on demand (p50 / max)', value: `${ms(p50, 1)} / ${ms(max, 1)}`, limit: `≤ COUNTRY_EXIT_WAIT_MS (${COUNTRY_EXIT_WAIT_MS} ms)`, withinLimit: max <= COUNTRY_EXIT_WAIT_MS },
      ],
    };
  } finally {
    await svc.stop();
  }
}
