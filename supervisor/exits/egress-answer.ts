import { isIP, isIPv4 } from 'node:net';

/** What an IP-echo endpoint's answer says: the address the request came from, or why it says none. */
export type EgressAnswer = { ok: true; address: string } | { ok: false; why: string };

/** The longest answer read: an address, or a small JSON object around one. */
export const MAX_ECHO_ANSWER_BYTES = 4096;

/**
 * JSON fields that hold the caller's address in the answers of common IP-echo services:
 * check.torproject.org/api/ip (`IP`), ipify and most others (`ip`), httpbin (`origin`).
 */
const ADDRESS_FIELDS = ['IP', 'ip', 'address', 'origin'] as const;

/**
 * Reads an IP-echo endpoint's answer (EGRESS_PROBE_URLS): a body that is one IPv4 or IPv6
 * address (surrounding white space allowed), or a JSON object naming one in `IP`, `ip`,
 * `address` or `origin`. Anything else (an HTML page, a list, two addresses) is no answer:
 * guessing would let a wrong address decide distinctness and bans. An IPv4-mapped IPv6 address
 * is written as the IPv4 address it is; IPv6 in its canonical form (RFC 5952).
 */
export function readEgressAnswer(body: string): EgressAnswer {
  if (body.length > MAX_ECHO_ANSWER_BYTES) return { ok: false, why: `the answer is longer than ${MAX_ECHO_ANSWER_BYTES} bytes` };
  const text = body.trim();
  if (text === '') return { ok: false, why: 'the answer is empty' };
  const plain = normaliseAddress(text);
  if (plain !== undefined) return { ok: true, address: plain };
  if (!text.startsWith('{')) return { ok: false, why: `the answer is not an address: ${JSON.stringify(text.slice(0, 40))}` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, why: 'the answer is neither an address nor JSON' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { ok: false, why: 'the JSON answer is not an object' };
  const record = parsed as Record<string, unknown>;
  for (const field of ADDRESS_FIELDS) {
    if (!Object.hasOwn(record, field)) continue;
    const value = record[field];
    const address = typeof value === 'string' ? normaliseAddress(value.trim()) : undefined;
    if (address === undefined) return { ok: false, why: `the JSON answer's ${field} is not one address` };
    return { ok: true, address };
  }
  return { ok: false, why: `the JSON answer names no address (${ADDRESS_FIELDS.join(', ')})` };
}

/** One IP address in its canonical form, or undefined when `text` is not exactly one. */
export function normaliseAddress(text: string): string | undefined {
  if (isIPv4(text)) return text;
  if (isIP(text) !== 6) return undefined;
  if (text.includes('%')) return undefined; // a zone index names a link, not an address sites see
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(text);
  if (mapped?.[1] !== undefined && isIPv4(mapped[1])) return mapped[1];
  // The WHATWG URL parser writes an IPv6 host in its one canonical form (RFC 5952).
  try {
    return new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
}
