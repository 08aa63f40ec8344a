/** A cancellable pending callback. */
export interface HealthTimer {
  cancel(): void;
}

/**
 * Time as the remediation executor sees it: injected so tests run the ladder's minutes of
 * backoff in fake time, and so every timer has an owner that can cancel it.
 */
export interface HealthClock {
  now(): number;
  setTimer(ms: number, callback: () => void): HealthTimer;
}

export const systemClock: HealthClock = {
  now: () => Date.now(),
  setTimer(ms, callback) {
    const handle = setTimeout(callback, Math.max(0, ms));
    return { cancel: () => clearTimeout(handle) };
  },
};
