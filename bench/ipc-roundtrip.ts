import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WorkerManager, type WorkerHandle } from '../supervisor/cluster/worker-manager.js';
import { quietLogger } from '../test/support/fakes/quiet-logger.js';
import { ms, percentile, type BenchSection } from './report.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Budget share of the connection-setup p50 (DESIGN: ≤ 0.5 ms p50, ≤ 3 ms p99 for the whole setup). */
const SETUP_P50_BUDGET_MS = 0.5;
const SETUP_P99_BUDGET_MS = 3;

/**
 * The IPC round trip on its own: a real cluster worker and the real endpoint, one request
 * at a time and 100 in flight, from the supervisor side.
 */
export async function benchIpcRoundTrip(samples = 20_000): Promise<BenchSection> {
  const manager = new WorkerManager({
    exec: path.join(here, '..', 'test', 'support', 'processes', 'ipc-test-worker.js'),
    specs: [{ role: 'proxy', count: 1 }],
    env: {},
    log: quietLogger(),
  });
  await manager.start();
  const h = manager.handles()[0] as WorkerHandle;
  for (let i = 0; i < 2000; i++) await h.endpoint.request('ping', { sentAt: 0 });
  const serial: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await h.endpoint.request('ping', { sentAt: 0 });
    serial.push(performance.now() - t);
  }
  const concurrent: number[] = [];
  const inFlight = 100;
  for (let round = 0; round < samples / inFlight; round++) {
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        const t = performance.now();
        await h.endpoint.request('ping', { sentAt: 0 });
        concurrent.push(performance.now() - t);
      }),
    );
  }
  await manager.stop();
  serial.sort((a, b) => a - b);
  concurrent.sort((a, b) => a - b);
  const p50 = percentile(serial, 0.5);
  const p99 = percentile(serial, 0.99);
  return {
    title: 'IPC round trip (supervisor ↔ worker)',
    method: `${samples} requests over node:cluster IPC with the real typed endpoint, one at a time, then ${inFlight} in flight. Limit: the whole connection setup budget of DESIGN.md, of which the round trip is one part.`,
    figures: [
      { name: 'one at a time, p50', value: ms(p50), limit: `≤ ${SETUP_P50_BUDGET_MS} ms (setup p50)`, withinLimit: p50 <= SETUP_P50_BUDGET_MS },
      { name: 'one at a time, p99', value: ms(p99), limit: `≤ ${SETUP_P99_BUDGET_MS} ms (setup p99)`, withinLimit: p99 <= SETUP_P99_BUDGET_MS },
      { name: `${inFlight} in flight, p50`, value: ms(percentile(concurrent, 0.5)), limit: '', withinLimit: null },
      { name: `${inFlight} in flight, p99`, value: ms(percentile(concurrent, 0.99)), limit: '', withinLimit: null },
    ],
  };
}
