/**
 * tor's own notice lines (`Log notice stdout`) carry bootstrap progress before the control port is
 * up: `Nov 22 05:33:55.000 [notice] Bootstrapped 5% (conn): Connecting to a relay`.
 */
export interface LoggedBootstrap {
  progress: number;
  tag?: string;
  summary?: string;
}

const BOOTSTRAPPED = /\[notice\] Bootstrapped (\d{1,3})%(?: \(([^)]*)\))?(?:: (.*))?$/;

export function parseBootstrapLogLine(line: string): LoggedBootstrap | undefined {
  const m = BOOTSTRAPPED.exec(line);
  if (!m) return undefined;
  const progress = Number(m[1]);
  if (progress > 100) return undefined;
  const out: LoggedBootstrap = { progress };
  if (m[2]) out.tag = m[2];
  if (m[3]) out.summary = m[3];
  return out;
}

/** tor's log severity, for mapping [warn]/[err] lines to our warn level. */
export function logLineSeverity(line: string): 'debug' | 'info' | 'notice' | 'warn' | 'err' | undefined {
  const m = /\[(debug|info|notice|warn|err)\]/.exec(line);
  return m ? (m[1] as 'debug' | 'info' | 'notice' | 'warn' | 'err') : undefined;
}

/**
 * tor's notice when a stream waited too long for its exit to answer (connection_edge.c:
 * "We tried for 10 seconds to connect to 'host' using exit $FP~nick at 1.2.3.4. Retrying on a
 * new circuit."). The exit's fingerprint, or undefined for any other line. Read from the log
 * because STREAM events are mostly off (supervisor/tor/README.md): this costs nothing per request.
 */
const STREAM_TIMEOUT = /\[notice\] We tried for \d+ seconds to connect to '.*' using exit \$([0-9A-Fa-f]{40})\b/;

export function parseStreamTimeoutLogLine(line: string): { exitFingerprint: string } | undefined {
  const m = STREAM_TIMEOUT.exec(line);
  return m ? { exitFingerprint: (m[1] as string).toUpperCase() } : undefined;
}
