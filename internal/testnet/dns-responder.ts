import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import {
  buildResponse,
  DNS_CLASS_IN,
  DNS_TYPE_A,
  DNS_TYPE_ANY,
  parseQuery,
  RCODE_NOERROR,
  RCODE_NXDOMAIN,
  RCODE_REFUSED,
  type DnsAnswer,
} from './dns-message.js';

export const TESTNET_DOMAIN = 'testnet';
export const TESTNET_ADDRESS = '127.0.0.1';

/**
 * The network's naming policy: `localhost` and every `*.testnet` name are 127.0.0.1; any other
 * name does not exist. Answering NXDOMAIN (rather than not answering) makes an exit fail an
 * unknown name in a fraction of a second instead of a 15 s resolver timeout per exit.
 */
export function testnetAddressFor(name: string): string | undefined {
  const lower = name.toLowerCase().replace(/\.$/, '');
  if (lower === 'localhost' || lower.endsWith(`.${TESTNET_DOMAIN}`)) return TESTNET_ADDRESS;
  return undefined;
}

/** Builds the reply to one datagram, or undefined when it must be ignored. */
export function answerQuery(packet: Buffer): Buffer | undefined {
  const parsed = parseQuery(packet);
  if (parsed.kind === 'ignore') return undefined;
  if (parsed.kind === 'unanswerable') return buildResponse(parsed);
  const q = parsed.question;
  const base: Omit<DnsAnswer, 'rcode'> = { id: q.id, opcode: q.opcode, recursionDesired: q.recursionDesired, rawQuestion: q.rawQuestion };
  if (q.class !== DNS_CLASS_IN) return buildResponse({ ...base, rcode: RCODE_REFUSED });
  const address = testnetAddressFor(q.name);
  if (address === undefined) return buildResponse({ ...base, rcode: RCODE_NXDOMAIN });
  // Known name, other record type (AAAA, MX…): NOERROR without records ("no data").
  const ipv4 = q.type === DNS_TYPE_A || q.type === DNS_TYPE_ANY ? [address] : [];
  return buildResponse({ ...base, rcode: RCODE_NOERROR, ipv4 });
}

export interface DnsResponderOptions {
  readonly host?: string;
  readonly port: number;
  readonly log: Logger;
}

/** A UDP DNS server on loopback for the network's exits (ServerDNSResolvConfFile points here). */
export class DnsResponder {
  readonly host: string;
  readonly port: number;
  private readonly socket: Socket;
  private readonly log: Logger;
  private answered = 0;
  private closed: Promise<void> | undefined;

  private constructor(socket: Socket, host: string, port: number, log: Logger) {
    this.socket = socket;
    this.host = host;
    this.port = port;
    this.log = log;
    socket.on('message', (packet, remote) => this.onMessage(packet, remote));
    socket.on('error', (err) => log.error('dns responder socket error', { error: err.message }));
  }

  static start(options: DnsResponderOptions): Promise<DnsResponder> {
    const host = options.host ?? '127.0.0.1';
    return new Promise((resolve, reject) => {
      const socket = createSocket('udp4');
      socket.once('error', reject);
      socket.bind(options.port, host, () => {
        socket.off('error', reject);
        const port = socket.address().port;
        options.log.debug('dns responder listening', { host, port });
        resolve(new DnsResponder(socket, host, port, options.log));
      });
    });
  }

  /** Queries answered so far (NXDOMAIN and errors included). */
  get queryCount(): number {
    return this.answered;
  }

  /** The line a resolv.conf needs to use this responder (tor accepts a port there). */
  resolvConfLine(): string {
    return `nameserver ${this.host}:${this.port}`;
  }

  private onMessage(packet: Buffer, remote: RemoteInfo): void {
    let reply: Buffer | undefined;
    try {
      reply = answerQuery(packet);
    } catch (err) {
      this.log.warn('dns responder could not parse a query', { error: errorMessage(err), from: remote.address });
      return;
    }
    if (!reply) return;
    this.answered += 1;
    this.socket.send(reply, remote.port, remote.address, (err) => {
      if (err && !this.closed) this.log.debug('dns reply not sent', { error: err.message });
    });
  }

  close(): Promise<void> {
    this.closed ??= new Promise((resolve) => this.socket.close(() => resolve()));
    return this.closed;
  }
}
