import { expect } from 'chai';
import { createSocket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import winston from 'winston';
import { answerQuery, DnsResponder, testnetAddressFor } from '../../internal/testnet/dns-responder.js';
import { buildQuery, DNS_TYPE_A, DNS_TYPE_AAAA, parseQuery, RCODE_FORMERR, RCODE_NOERROR, RCODE_NXDOMAIN } from '../../internal/testnet/dns-message.js';

const silent = winston.createLogger({ silent: true });

function queryRaw(port: number, packet: Buffer, timeoutMs = 1_000): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    const timer = setTimeout(() => {
      socket.close();
      resolve(undefined);
    }, timeoutMs);
    socket.once('message', (reply) => {
      clearTimeout(timer);
      socket.close();
      resolve(reply);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      socket.close();
      reject(err);
    });
    socket.send(packet, port, '127.0.0.1');
  });
}

function rcodeOf(reply: Buffer): number {
  return reply.readUInt16BE(2) & 0x0f;
}

describe('testnet DNS responder', () => {
  let dns: DnsResponder;
  let resolver: Resolver;

  before(async () => {
    dns = await DnsResponder.start({ port: 0, log: silent });
    resolver = new Resolver({ timeout: 1_000, tries: 1 });
    resolver.setServers([`127.0.0.1:${dns.port}`]);
  });

  after(async () => {
    resolver.cancel();
    await dns.close();
  });

  it('resolves *.testnet and localhost to 127.0.0.1 for a real resolver (c-ares)', async () => {
    expect(await resolver.resolve4('whoami.testnet')).to.deep.equal(['127.0.0.1']);
    expect(await resolver.resolve4('deep.sub.name.testnet')).to.deep.equal(['127.0.0.1']);
    expect(await resolver.resolve4('localhost')).to.deep.equal(['127.0.0.1']);
  });

  it('answers NXDOMAIN for every other name, and no data for other record types of known names', async () => {
    for (const name of ['example.com', 'testnet.example', 'nottestnet', 'whoami.testnet.com']) {
      const err = await resolver.resolve4(name).then(
        () => undefined,
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err?.code, name).to.equal('ENOTFOUND');
    }
    const noData = await resolver.resolve6('whoami.testnet').then(
      () => undefined,
      (e: NodeJS.ErrnoException) => e,
    );
    expect(noData?.code).to.equal('ENODATA');
  });

  it('echoes the question byte for byte (0x20 case randomisation) and the query id', async () => {
    const query = buildQuery(0xbeef, 'WhOaMi.TeStNeT');
    const reply = await queryRaw(dns.port, query);
    if (!reply) throw new Error('no reply');
    expect(reply.readUInt16BE(0)).to.equal(0xbeef);
    expect(rcodeOf(reply)).to.equal(RCODE_NOERROR);
    expect(reply.subarray(12, query.length).equals(query.subarray(12))).to.equal(true);
    expect(reply.readUInt16BE(6), 'one answer').to.equal(1);
    expect([...reply.subarray(reply.length - 4)]).to.deep.equal([127, 0, 0, 1]);
  });

  it('ignores garbage, answers FORMERR to a compressed question, and keeps serving', async () => {
    const before = dns.queryCount;
    expect(await queryRaw(dns.port, Buffer.from([1, 2, 3]), 300)).to.equal(undefined);
    const compressed = Buffer.concat([buildQuery(7, '').subarray(0, 12), Buffer.from([0xc0, 0x0c, 0, 1, 0, 1])]);
    const formerr = await queryRaw(dns.port, compressed);
    if (!formerr) throw new Error('no reply');
    expect(rcodeOf(formerr)).to.equal(RCODE_FORMERR);
    expect(await resolver.resolve4('still.testnet')).to.deep.equal(['127.0.0.1']);
    expect(dns.queryCount - before).to.equal(2);
  });

  it('never throws on arbitrary datagrams (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        const reply = answerQuery(Buffer.from(bytes));
        return reply === undefined || reply.length >= 12;
      }),
      { numRuns: fuzzRuns(2_000) },
    );
  });

  it('answers every well-formed question with its own question and the policy rcode (property)', () => {
    const label = fc.stringMatching(/^[a-zA-Z0-9-]{1,20}$/);
    const name = fc.oneof(
      fc.array(label, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('.')),
      fc.array(label, { minLength: 1, maxLength: 3 }).map((parts) => `${parts.join('.')}.TestNet`),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff }), name, fc.constantFrom(DNS_TYPE_A, DNS_TYPE_AAAA), (id, qname, type) => {
        const query = buildQuery(id, qname, type);
        const reply = answerQuery(query);
        if (!reply) return false;
        const parsed = parseQuery(query);
        if (parsed.kind !== 'query') return false;
        const expected = testnetAddressFor(qname) ? RCODE_NOERROR : RCODE_NXDOMAIN;
        const answers = reply.readUInt16BE(6);
        return (
          reply.readUInt16BE(0) === id &&
          rcodeOf(reply) === expected &&
          reply.subarray(12, query.length).equals(query.subarray(12)) &&
          answers === (expected === RCODE_NOERROR && type === DNS_TYPE_A ? 1 : 0)
        );
      }),
      { numRuns: fuzzRuns(1_000) },
    );
  });
});
