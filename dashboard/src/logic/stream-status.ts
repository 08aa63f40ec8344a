/** Where the live stream stands, as the header shows it. */
export type StreamStatus =
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'retrying'; atMs: number; reason: string }
  /** The tab is hidden: the stream is closed until it is shown again. */
  | { kind: 'paused' }
  /** A 403: this credential may not read the stream; retrying would not help. */
  | { kind: 'refused'; reason: string };

export function describeStreamStatus(s: StreamStatus, nowMs: number): string {
  switch (s.kind) {
    case 'connecting':
      return 'connecting…';
    case 'live':
      return 'live';
    case 'retrying': {
      const secs = Math.max(0, Math.ceil((s.atMs - nowMs) / 1000));
      return secs > 0 ? `reconnecting in ${secs}s` : 'reconnecting…';
    }
    case 'paused':
      return 'paused (tab hidden)';
    case 'refused':
      return s.reason;
  }
}
