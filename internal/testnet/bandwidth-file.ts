/**
 * A V3BandwidthsFile (bandwidth-file-spec 1.0.0: a timestamp line, then `node_id=$FP bw=N`)
 * giving every relay the same measured weight. Without it, self-measured bandwidth decides and
 * an exit that once carried a big transfer gets nearly every circuit.
 */
export const EQUAL_BANDWIDTH_WEIGHT = 1000;

/** How often the file is rewritten: authorities ignore a file older than a few days. */
export const BANDWIDTH_FILE_REFRESH_MS = 6 * 60 * 60 * 1000;

export function bandwidthFileContent(fingerprints: readonly string[], now: Date = new Date()): string {
  const timestamp = Math.floor(now.getTime() / 1000);
  const lines = fingerprints.map((fp) => `node_id=$${fp.toUpperCase()} bw=${EQUAL_BANDWIDTH_WEIGHT}`);
  return [String(timestamp), ...lines, ''].join('\n');
}
