import { TorrcOptionError } from './errors.js';

/**
 * Node lists as tor's routerset options take them (ExitNodes, ExcludeExitNodes): country codes
 * `{de}`, fingerprints `$HEX40` (optionally `~nick`), nicknames, IPv4 addresses or CIDR blocks.
 * Only these shapes are accepted so that a configured value can never smuggle anything else
 * into a torrc line or a SETCONF command.
 */

const COUNTRY = /^\{([A-Za-z]{2}|\?\?)\}$/;
const FINGERPRINT = /^\$?([0-9A-Fa-f]{40})(?:[~=]([A-Za-z0-9]{1,19}))?$/;
const NICKNAME = /^[A-Za-z0-9]{1,19}$/;
const IPV4_OR_CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/;

export function normaliseNodeSelector(option: string, raw: string): string {
  const item = raw.trim();
  const country = COUNTRY.exec(item);
  if (country) return `{${country[1]!.toLowerCase()}}`;
  const fp = FINGERPRINT.exec(item);
  if (fp) return `$${fp[1]!.toUpperCase()}${fp[2] ? `~${fp[2]}` : ''}`;
  const ip = IPV4_OR_CIDR.exec(item);
  if (ip) {
    const octets = ip.slice(1, 5).map(Number);
    const mask = ip[5] === undefined ? undefined : Number(ip[5]);
    if (octets.every((o) => o <= 255) && (mask === undefined || mask <= 32)) return item;
    throw new TorrcOptionError(option, `bad address ${JSON.stringify(item)}`);
  }
  // A 40-hex string without `$` matched FINGERPRINT already; anything else alphanumeric is a nickname.
  if (NICKNAME.test(item)) return item;
  throw new TorrcOptionError(option, `not a country code, fingerprint, nickname or address: ${JSON.stringify(item)}`);
}

/** Parses `{de},{nl}` / `$FP,nick` as written in TOR_EXIT_NODES. An empty or blank text is an empty list. */
export function parseNodeList(option: string, text: string): string[] {
  if (text.trim() === '') return [];
  return text.split(',').map((item) => normaliseNodeSelector(option, item));
}

export function formatNodeList(option: string, nodes: readonly string[]): string {
  return nodes.map((n) => normaliseNodeSelector(option, n)).join(',');
}
