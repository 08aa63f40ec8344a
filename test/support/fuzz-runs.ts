/**
 * How long the property tests run. `npm test` runs each at its base count; a long local run
 * (`npm run test:fuzz`) multiplies every count by EXITPOOL_FUZZ_SCALE. Importing this module also
 * scales fast-check's default for properties that name no count.
 */
import fc from 'fast-check';

const FAST_CHECK_DEFAULT_RUNS = 100;

export const FUZZ_SCALE = Math.max(1, Math.floor(Number(process.env.EXITPOOL_FUZZ_SCALE ?? '1')) || 1);

export function fuzzRuns(base: number): number {
  return base * FUZZ_SCALE;
}

fc.configureGlobal({ numRuns: fuzzRuns(FAST_CHECK_DEFAULT_RUNS) });
