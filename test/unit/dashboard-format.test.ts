import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import {
  formatAgo,
  formatByteRate,
  formatBytes,
  formatCount,
  formatDuration,
  formatLatency,
  formatRate,
  formatUnixUtc,
  formatUtc,
} from '../../dashboard/src/logic/format.js';

describe('dashboard formatters', () => {
  it('formats bytes in binary units with at most three significant digits', () => {
    expect(formatBytes(0)).to.equal('0 B');
    expect(formatBytes(1023)).to.equal('1023 B');
    expect(formatBytes(1536)).to.equal('1.50 KiB');
    expect(formatBytes(10 * 1024 * 1024 + 1)).to.equal('10.0 MiB');
    expect(formatBytes(300 * 1024 ** 3)).to.equal('300 GiB');
    expect(formatBytes(-1)).to.equal('–');
    expect(formatBytes(Number.NaN)).to.equal('–');
    expect(formatByteRate(2048)).to.equal('2.00 KiB/s');
  });

  it('groups counts by thousands, independent of the locale', () => {
    expect(formatCount(0)).to.equal('0');
    expect(formatCount(999)).to.equal('999');
    expect(formatCount(1000)).to.equal('1,000');
    expect(formatCount(1234567)).to.equal('1,234,567');
    expect(formatCount(-45000)).to.equal('-45,000');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(Number(formatCount(n).replaceAll(',', ''))).to.equal(n);
      }),
    );
  });

  it('formats rates without noise digits', () => {
    expect(formatRate(0)).to.equal('0');
    expect(formatRate(-3)).to.equal('0');
    expect(formatRate(0.25)).to.equal('0.25');
    expect(formatRate(0.5)).to.equal('0.5');
    expect(formatRate(3)).to.equal('3');
    expect(formatRate(12.34)).to.equal('12.3');
    expect(formatRate(1234.4)).to.equal('1,234');
  });

  it('formats durations with the two largest units', () => {
    expect(formatDuration(9)).to.equal('9s');
    expect(formatDuration(65)).to.equal('1m 5s');
    expect(formatDuration(3725)).to.equal('1h 2m');
    expect(formatDuration(93_784)).to.equal('1d 2h');
    expect(formatDuration(-1)).to.equal('–');
  });

  it('formats latency in ms or s', () => {
    expect(formatLatency(0.83)).to.equal('0.8 ms');
    expect(formatLatency(12.4)).to.equal('12 ms');
    expect(formatLatency(1250)).to.equal('1.25 s');
    expect(formatLatency(Number.POSITIVE_INFINITY)).to.equal('–');
  });

  it('formats times in UTC and relative to now', () => {
    expect(formatUtc('2026-11-22T06:17:30.631Z')).to.equal('2026-11-22 06:17:30');
    expect(formatUtc('not a time')).to.equal('not a time');
    expect(formatUnixUtc(0)).to.equal('1970-01-01 00:00:00');
    const now = Date.parse('2026-01-01T12:00:00Z');
    expect(formatAgo('2026-01-01T12:00:00Z', now)).to.equal('just now');
    expect(formatAgo('2026-01-01T11:59:18Z', now)).to.equal('42s ago');
    expect(formatAgo('2026-01-01T11:55:00Z', now)).to.equal('5m ago');
    expect(formatAgo('2026-01-01T09:00:00Z', now)).to.equal('3h ago');
    expect(formatAgo('2025-12-30T12:00:00Z', now)).to.equal('2d ago');
    // A clock slightly ahead of ours is not "in the future".
    expect(formatAgo('2026-01-01T12:00:05Z', now)).to.equal('just now');
  });
});
