import { isIPv4 } from 'node:net';
import { InvalidTestnetOptionsError } from './errors.js';

export interface GeoipEntry {
  readonly address: string;
  readonly country: string;
}

export function ipv4ToInteger(address: string): number {
  if (!isIPv4(address)) throw new InvalidTestnetOptionsError(`not an IPv4 address: ${address}`);
  return address.split('.').reduce((acc, octet) => acc * 256 + Number(octet), 0);
}

/**
 * A GeoIPFile in the format tor 0.4.9 reads (`INTIPLOW,INTIPHIGH,CC`, one range per line,
 * `#` comments), one single-address range per exit. tor lower-cases the code, so
 * `GETINFO ip-to-country/127.0.0.11` answers e.g. `de`. Only loopback exits are listed: every
 * other address is `??`, and the file stays a few bytes instead of the stock 9 MB.
 */
export function geoipFileContent(entries: readonly GeoipEntry[]): string {
  const byAddress = new Map<number, string>();
  for (const { address, country } of entries) {
    if (!/^[a-z]{2}$/i.test(country)) throw new InvalidTestnetOptionsError(`not a two-letter country code: ${country}`);
    byAddress.set(ipv4ToInteger(address), country.toUpperCase());
  }
  const lines = [...byAddress.entries()].sort(([a], [b]) => a - b).map(([ip, cc]) => `${ip},${ip},${cc}`);
  return ['# exitpool private test network: loopback exit address -> country', ...lines, ''].join('\n');
}

/** The IPv6 database: no entries (exits are IPv4 only), but a file tor parses without complaint. */
export function geoip6FileContent(): string {
  return '# exitpool private test network: no IPv6 entries\n';
}
