import { PublicNetworkRefusedError } from './errors.js';

/**
 * Development and test machines must never start a tor that talks to the public network.
 * Unless the caller explicitly allows the public network, a torrc must carry the private-network
 * markers: `TestingTorNetwork 1`, `UseDefaultFallbackDirs 0` and at least one `DirAuthority` on
 * a loopback address. Options are matched case-insensitively, as tor does; the last occurrence
 * of a scalar option wins, as in tor.
 */
export function missingPrivateNetworkMarkers(torrcText: string): string[] {
  const scalar = new Map<string, string>();
  const dirAuthorities: string[] = [];
  for (const raw of torrcText.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = /^(\S+)\s*(.*)$/.exec(line);
    if (!match) continue;
    const key = match[1]!.toLowerCase();
    const value = match[2]!.trim();
    if (key === 'dirauthority') dirAuthorities.push(value);
    else scalar.set(key, value);
  }
  const missing: string[] = [];
  if (scalar.get('testingtornetwork') !== '1') missing.push('TestingTorNetwork 1');
  if (scalar.get('usedefaultfallbackdirs') !== '0') missing.push('UseDefaultFallbackDirs 0');
  const loopbackAuthority = dirAuthorities.some((v) => /(^|\s)127\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+(\s|$)/.test(v));
  if (!loopbackAuthority) missing.push('DirAuthority on 127.0.0.x');
  else if (dirAuthorities.some((v) => !/(^|\s)127\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+(\s|$)/.test(v))) {
    missing.push('every DirAuthority on 127.0.0.x');
  }
  return missing;
}

export function assertPrivateNetworkTorrc(torrcText: string): void {
  const missing = missingPrivateNetworkMarkers(torrcText);
  if (missing.length > 0) throw new PublicNetworkRefusedError(missing);
}
