/**
 * Go-style durations ("300ms", "90s", "10m", "1h30m", "1.5h"), the form users of similar
 * pools already write, printed back the way Go prints them ("10m0s") as the configuration echo of GET /api/pool shows them.
 */
export class DurationSyntaxError extends Error {
  constructor(readonly text: string) {
    super(`not a duration: ${JSON.stringify(text)} (expected e.g. 90s, 10m, 1h30m)`);
    this.name = 'DurationSyntaxError';
  }
}

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d+)?|\.\d+)(ms|h|m|s)/y;

/**
 * Parses a duration into whole milliseconds. A bare non-negative integer is read as seconds,
 * because that is what operators type into environment files most often.
 */
export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === '') throw new DurationSyntaxError(text);
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  let total = 0;
  PART.lastIndex = 0;
  let pos = 0;
  while (pos < s.length) {
    PART.lastIndex = pos;
    const m = PART.exec(s);
    if (!m) throw new DurationSyntaxError(text);
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    pos = PART.lastIndex;
  }
  if (!Number.isFinite(total) || total > Number.MAX_SAFE_INTEGER) throw new DurationSyntaxError(text);
  return Math.round(total);
}

/** Formats milliseconds the way Go's time.Duration.String does for whole seconds: 10m0s, 1h0m0s, 1.5s. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const secondsMs = ms % 60_000;
  const seconds = String(secondsMs / 1000);
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}
