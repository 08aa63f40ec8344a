/** Display formatting shared by every view. Pure: no DOM, no React, no locale state. */

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** 1536 → "1.5 KiB". Binary units, three significant digits at most. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '–';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${BYTE_UNITS[unit]}`;
}

/** 1234567 → "1,234,567". Grouping is fixed so screenshots and tests do not depend on locale. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return '–';
  const sign = n < 0 ? '-' : '';
  const whole = Math.round(Math.abs(n)).toString();
  return sign + whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A per-second rate: "0", "0.25", "3.4", "120". */
export function formatRate(perSecond: number): string {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return '0';
  if (perSecond >= 100) return formatCount(perSecond);
  if (perSecond >= 10) return perSecond.toFixed(1);
  return perSecond.toFixed(2).replace(/\.?0+$/, '');
}

/** Bytes per second: "1.5 KiB/s". */
export function formatByteRate(bytesPerSecond: number): string {
  return `${formatBytes(Math.max(0, bytesPerSecond))}/s`;
}

/** 93784 → "1d 2h", 3725 → "1h 2m", 65 → "1m 5s", 9 → "9s". Two units at most. */
export function formatDuration(totalSeconds: number): string {
  if (!Number.isFinite(totalSeconds) || totalSeconds < 0) return '–';
  const s = Math.floor(totalSeconds);
  const days = Math.floor(s / 86_400);
  const hours = Math.floor((s % 86_400) / 3_600);
  const minutes = Math.floor((s % 3_600) / 60);
  const seconds = s % 60;
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${seconds}s`;
  return `${seconds}s`;
}

/** Milliseconds with sensible precision: "0.8 ms", "12 ms", "1.25 s". */
export function formatLatency(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${Math.round(ms)} ms`;
  return `${ms.toFixed(1)} ms`;
}

/** How long ago `iso` was, relative to `nowMs`: "just now", "42s ago", "5m ago", "3h ago", "2d ago". */
export function formatAgo(iso: string, nowMs: number): string {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return '–';
  const secs = Math.max(0, Math.floor((nowMs - then) / 1000));
  if (secs < 2) return 'just now';
  if (secs < 60) return `${secs}s ago`;
  if (secs < 3_600) return `${Math.floor(secs / 60)}m ago`;
  if (secs < 86_400) return `${Math.floor(secs / 3_600)}h ago`;
  return `${Math.floor(secs / 86_400)}d ago`;
}

/** "2026-11-22 06:17:30" in UTC: the service logs and audit events are all UTC. */
export function formatUtc(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', '');
}

/** Unix seconds as formatUtc does. */
export function formatUnixUtc(seconds: number): string {
  return formatUtc(new Date(seconds * 1000).toISOString());
}
