import { expect } from 'chai';
import { emptyBatch, readWholeState, type StateBatch, type StateStore } from '../../../supervisor/state/state-store.js';

/** Rings small enough to see the trim. */
export const CONTRACT_CAPACITY = { 'audit-session': 3, 'audit-operator': 3, 'stats-fine': 900, 'stats-long': 1440 };

/**
 * What every StateStore backend must do, whatever it keeps its data in: two batches (upserts, a
 * delete, a namespace replaced, ring appends beyond the capacity), then a fresh store on the same
 * place reads exactly what they left. `open` makes a store on one place, each time anew.
 */
export async function expectStoreRoundTrip(open: () => StateStore): Promise<void> {
  const store = open();
  expect((await readWholeState(store)).records.sessions.size).to.equal(0);
  const b: StateBatch = emptyBatch(CONTRACT_CAPACITY);
  b.puts.push({ ns: 'sessions', key: 'a', value: '1' }, { ns: 'sessions', key: 'b', value: '2' }, { ns: 'health', key: '0', value: 'h0' });
  // Values with the separators a backend might use (a colon, a newline) must come back intact.
  for (let i = 1; i <= 5; i++) b.appends.push({ ring: 'audit-session', seq: i * 2, value: `e:${i}\n` });
  await store.write(b);
  const b2 = emptyBatch(CONTRACT_CAPACITY);
  b2.deletes.push({ ns: 'sessions', key: 'a' });
  b2.puts.push({ ns: 'sessions', key: 'b', value: '3' });
  b2.replace.push('health');
  b2.puts.push({ ns: 'health', key: '1', value: 'h1' });
  await store.write(b2);
  await store.close();

  const again = open();
  const s = await readWholeState(again);
  expect([...s.records.sessions]).to.deep.equal([['b', '3']]);
  expect([...s.records.health]).to.deep.equal([['1', 'h1']]);
  expect(s.rings['audit-session'].map((r) => [r.seq, r.value]), 'the newest 3, oldest first').to.deep.equal([
    [6, 'e:3\n'],
    [8, 'e:4\n'],
    [10, 'e:5\n'],
  ]);
  expect(s.movedAside).to.equal(null);
  await again.close();
}
