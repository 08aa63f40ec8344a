/**
 * Just enough of RFC 1035 to answer one-question queries. The question section is echoed
 * byte for byte: tor's resolver (libevent evdns) randomises the letter case of the name
 * (0x20 encoding) and drops answers whose question does not match exactly.
 */

export const DNS_TYPE_A = 1;
export const DNS_TYPE_AAAA = 28;
export const DNS_TYPE_ANY = 255;
export const DNS_CLASS_IN = 1;

export const RCODE_NOERROR = 0;
export const RCODE_FORMERR = 1;
export const RCODE_NXDOMAIN = 3;
export const RCODE_NOTIMP = 4;
export const RCODE_REFUSED = 5;

const HEADER_LENGTH = 12;
const FLAG_QR = 0x8000;
const FLAG_AA = 0x0400;
const FLAG_RD = 0x0100;
const FLAG_RA = 0x0080;
const MAX_NAME_LENGTH = 255;

export interface DnsQuestion {
  readonly id: number;
  readonly opcode: number;
  readonly recursionDesired: boolean;
  /** Lower-cased, without the trailing dot; '' for the root. */
  readonly name: string;
  readonly type: number;
  readonly class: number;
  /** The question exactly as received (name, type, class). */
  readonly rawQuestion: Buffer;
}

export type ParsedQuery =
  | { readonly kind: 'query'; readonly question: DnsQuestion }
  /** Header readable, rest not: answer with this rcode and no question. */
  | { readonly kind: 'unanswerable'; readonly id: number; readonly opcode: number; readonly recursionDesired: boolean; readonly rcode: number }
  /** Too short to be a query, or a response: ignore. */
  | { readonly kind: 'ignore' };

export function parseQuery(packet: Buffer): ParsedQuery {
  if (packet.length < HEADER_LENGTH) return { kind: 'ignore' };
  const id = packet.readUInt16BE(0);
  const flags = packet.readUInt16BE(2);
  if ((flags & FLAG_QR) !== 0) return { kind: 'ignore' };
  const opcode = (flags >> 11) & 0x0f;
  const recursionDesired = (flags & FLAG_RD) !== 0;
  const unanswerable = (rcode: number): ParsedQuery => ({ kind: 'unanswerable', id, opcode, recursionDesired, rcode });
  if (opcode !== 0) return unanswerable(RCODE_NOTIMP);
  if (packet.readUInt16BE(4) !== 1) return unanswerable(RCODE_FORMERR);

  const labels: string[] = [];
  let offset = HEADER_LENGTH;
  let nameLength = 0;
  for (;;) {
    if (offset >= packet.length) return unanswerable(RCODE_FORMERR);
    const length = packet[offset] ?? 0;
    offset += 1;
    if (length === 0) break;
    // Compression pointers (0xC0) and the reserved label types never appear in a question.
    if ((length & 0xc0) !== 0) return unanswerable(RCODE_FORMERR);
    if (offset + length > packet.length) return unanswerable(RCODE_FORMERR);
    nameLength += length + 1;
    if (nameLength > MAX_NAME_LENGTH) return unanswerable(RCODE_FORMERR);
    labels.push(packet.toString('latin1', offset, offset + length));
    offset += length;
  }
  if (offset + 4 > packet.length) return unanswerable(RCODE_FORMERR);
  const type = packet.readUInt16BE(offset);
  const qclass = packet.readUInt16BE(offset + 2);
  offset += 4;
  return {
    kind: 'query',
    question: {
      id,
      opcode,
      recursionDesired,
      name: labels.join('.').toLowerCase(),
      type,
      class: qclass,
      rawQuestion: Buffer.from(packet.subarray(HEADER_LENGTH, offset)),
    },
  };
}

export interface DnsAnswer {
  readonly id: number;
  readonly opcode: number;
  readonly recursionDesired: boolean;
  readonly rcode: number;
  readonly rawQuestion?: Buffer;
  /** IPv4 addresses for A records answering the question's name. */
  readonly ipv4?: readonly string[];
  readonly ttlSeconds?: number;
}

export function buildResponse(answer: DnsAnswer): Buffer {
  const addresses = answer.rawQuestion ? (answer.ipv4 ?? []) : [];
  const header = Buffer.alloc(HEADER_LENGTH);
  header.writeUInt16BE(answer.id, 0);
  const flags = FLAG_QR | ((answer.opcode & 0x0f) << 11) | FLAG_AA | (answer.recursionDesired ? FLAG_RD : 0) | FLAG_RA | (answer.rcode & 0x0f);
  header.writeUInt16BE(flags, 2);
  header.writeUInt16BE(answer.rawQuestion ? 1 : 0, 4);
  header.writeUInt16BE(addresses.length, 6);
  const records = addresses.map((address) => {
    const record = Buffer.alloc(16);
    record.writeUInt16BE(0xc000 | HEADER_LENGTH, 0); // pointer to the question's name
    record.writeUInt16BE(DNS_TYPE_A, 2);
    record.writeUInt16BE(DNS_CLASS_IN, 4);
    record.writeUInt32BE(answer.ttlSeconds ?? 60, 6);
    record.writeUInt16BE(4, 10);
    address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
    return record;
  });
  return Buffer.concat([header, answer.rawQuestion ?? Buffer.alloc(0), ...records]);
}

/** Encodes a query (used by tests and diagnostics). */
export function buildQuery(id: number, name: string, type: number = DNS_TYPE_A): Buffer {
  const header = Buffer.alloc(HEADER_LENGTH);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(FLAG_RD, 2);
  header.writeUInt16BE(1, 4);
  const labels = name.split('.').filter((label) => label.length > 0);
  const nameParts = labels.flatMap((label) => [Buffer.from([label.length]), Buffer.from(label, 'latin1')]);
  const tail = Buffer.alloc(5);
  tail.writeUInt8(0, 0);
  tail.writeUInt16BE(type, 1);
  tail.writeUInt16BE(DNS_CLASS_IN, 3);
  return Buffer.concat([header, ...nameParts, tail]);
}
