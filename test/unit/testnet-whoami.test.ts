import { expect } from 'chai';
import { request } from 'node:http';
import { connect } from 'node:net';
import winston from 'winston';
import { InvalidTestnetOptionsError } from '../../internal/testnet/errors.js';
import { CAPTCHA_MARKER, normaliseSourceIp, WhoamiServer, type WhoamiJson } from '../../internal/testnet/whoami-server.js';

const silent = winston.createLogger({ silent: true });

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** GET from a chosen loopback source address, as an exit bound by the shim would connect. */
function getFrom(server: WhoamiServer, sourceIp: string, path = '/'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: server.host, port: server.port, path, localAddress: sourceIp, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('testnet whoami server', () => {
  let server: WhoamiServer;

  beforeEach(async () => {
    server = await WhoamiServer.start({ port: 0, log: silent });
  });

  afterEach(async () => {
    await server.close();
  });

  it("answers the caller's source IP as text, and as JSON on /json", async () => {
    const text = await getFrom(server, '127.0.0.12');
    expect(text.status).to.equal(200);
    expect(text.body).to.equal('127.0.0.12\n');
    const json = await getFrom(server, '127.0.0.13', '/json');
    expect(json.status).to.equal(200);
    const body = JSON.parse(json.body) as WhoamiJson;
    expect(body).to.deep.include({ ip: '127.0.0.13', hits: 1, path: '/json' });
  });

  it('answers each configured source IP with its behaviour and leaves the others alone', async () => {
    server.setBehaviour('127.0.0.11', 'forbidden');
    server.setBehaviour('127.0.0.12', 'captcha');
    server.setBehaviour('127.0.0.13', 'rate_limited');
    server.setBehaviour('127.0.0.14', 'reset');

    expect((await getFrom(server, '127.0.0.11')).status).to.equal(403);
    const captcha = await getFrom(server, '127.0.0.12');
    expect(captcha.status).to.equal(200);
    expect(captcha.headers['content-type']).to.match(/^text\/html/);
    expect(captcha.body).to.include(CAPTCHA_MARKER);
    const limited = await getFrom(server, '127.0.0.13');
    expect(limited.status).to.equal(429);
    expect(limited.headers['retry-after']).to.equal('30');
    const reset = await getFrom(server, '127.0.0.14').then(
      () => undefined,
      (err: NodeJS.ErrnoException) => err,
    );
    expect(reset?.code).to.equal('ECONNRESET');
    expect((await getFrom(server, '127.0.0.15')).body).to.equal('127.0.0.15\n');

    server.setBehaviour('127.0.0.11', 'ok');
    expect((await getFrom(server, '127.0.0.11')).status).to.equal(200);
    server.clearBehaviours();
    expect((await getFrom(server, '127.0.0.14')).body).to.equal('127.0.0.14\n');
  });

  it('counts requests per source IP, refused and reset ones included', async () => {
    server.setBehaviour('127.0.0.21', 'reset');
    await getFrom(server, '127.0.0.21').catch(() => undefined);
    await getFrom(server, '127.0.0.21').catch(() => undefined);
    await getFrom(server, '127.0.0.22');
    expect(server.hits('127.0.0.21')).to.equal(2);
    expect(server.hits('127.0.0.22')).to.equal(1);
    expect(server.hits('127.0.0.99')).to.equal(0);
    expect([...server.hitsBySource().keys()].sort()).to.deep.equal(['127.0.0.21', '127.0.0.22']);
    server.resetHits();
    expect(server.hits('127.0.0.22')).to.equal(0);
  });

  it('serves absolute-form request targets, as an HTTP proxy forwards them without CONNECT', async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: server.host, port: server.port, localAddress: '127.0.0.16' }, () => {
        socket.write(`GET http://whoami.testnet:${server.port}/json HTTP/1.1\r\nHost: whoami.testnet:${server.port}\r\nConnection: close\r\n\r\n`);
      });
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    expect(raw).to.match(/^HTTP\/1\.1 200 /);
    const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as WhoamiJson;
    expect(body).to.deep.include({ ip: '127.0.0.16', path: '/json', host: `whoami.testnet:${server.port}` });
  });

  it('echoes the source address on /ip, apart from the site: no hit counted, no site behaviour, its own behaviours', async () => {
    server.setBehaviour('127.0.0.31', 'captcha');
    const echoed = await getFrom(server, '127.0.0.31', '/ip');
    expect([echoed.status, echoed.body]).to.deep.equal([200, '127.0.0.31\n']);
    expect(server.hits('127.0.0.31'), 'a probe is not a visit of the site').to.equal(0);
    expect(server.echoHits('127.0.0.31')).to.equal(1);
    server.setEchoBehaviour('127.0.0.32', 'garbage');
    expect((await getFrom(server, '127.0.0.32', '/ip')).body).to.not.match(/127\.0\.0\.32/);
    server.setEchoBehaviour('127.0.0.33', 'reset');
    const reset = await getFrom(server, '127.0.0.33', '/ip').then(
      () => undefined,
      (err: NodeJS.ErrnoException) => err,
    );
    expect(reset?.code).to.equal('ECONNRESET');
    expect((await getFrom(server, '127.0.0.33')).body, 'the site still answers').to.equal('127.0.0.33\n');
    server.clearEchoBehaviours();
    expect((await getFrom(server, '127.0.0.33', '/ip')).body).to.equal('127.0.0.33\n');
    expect([...server.echoHitsBySource().keys()].sort()).to.deep.equal(['127.0.0.31', '127.0.0.32', '127.0.0.33']);
    expect(server.echoUrl()).to.equal(`http://whoami.testnet:${server.port}/ip`);
    expect(() => server.setEchoBehaviour('nope', 'reset')).to.throw(InvalidTestnetOptionsError);
  });

  it('builds URLs by network name and by address, and rejects a malformed source IP', () => {
    expect(server.url('/json')).to.equal(`http://whoami.testnet:${server.port}/json`);
    expect(server.directUrl()).to.equal(`http://127.0.0.1:${server.port}/`);
    expect(() => server.setBehaviour('not-an-ip', 'forbidden')).to.throw(InvalidTestnetOptionsError);
    expect(normaliseSourceIp('::ffff:127.0.0.12')).to.equal('127.0.0.12');
  });

  it('closes promptly even with an idle keep-alive connection open', async () => {
    const socket = connect({ host: server.host, port: server.port });
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // close() resolves only once every connection is gone: the idle keep-alive one is closed by
    // the server, not left to its keep-alive timeout (the test's own timeout bounds the wait).
    await server.close();
    await ended;
    expect(socket.destroyed).to.equal(true);
  });
});
