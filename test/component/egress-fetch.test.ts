/**
 * The worker side of an egress probe (`egress.fetch`, workers/proxy/egress-probe.ts): one GET
 * through an instance's SocksPort, here a stand-in SOCKS5 server that connects to local servers.
 * The name goes to the SOCKS server unresolved; a status, a size, a refusal, a SocksPort that is
 * not there and a certificate nobody vouches for each fail the fetch with their own reason.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fetchThroughInstance } from '../../workers/proxy/egress-probe.js';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';

const run = promisify(execFile);

describe('egress fetch through an instance (worker side)', function () {
  this.timeout(30_000);
  let socks: FakeSocksBackend;
  let http: Server;
  let port: number;
  const seen: IncomingMessage[] = [];

  before(async () => {
    socks = await startFakeSocksBackend();
    socks.hosts.set('echo.testnet', '127.0.0.1');
    http = createServer((req: IncomingMessage, res: ServerResponse) => {
      seen.push(req);
      if (req.url === '/ip') return void res.end('127.0.0.1\n');
      if (req.url === '/busy') {
        res.statusCode = 503;
        return void res.end('busy');
      }
      if (req.url === '/big') return void res.end('x'.repeat(10_000));
      if (req.url === '/slow') return; // never answers
      res.end('?');
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', () => resolve()));
    port = (http.address() as AddressInfo).port;
  });

  after(async () => {
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await socks.close();
  });

  const through = (url: string, extra: { timeoutMs?: number; maxBytes?: number; socksPort?: number } = {}) =>
    fetchThroughInstance({ socks: { host: '127.0.0.1', port: extra.socksPort ?? socks.port }, url, timeoutMs: extra.timeoutMs ?? 5_000, maxBytes: extra.maxBytes ?? 4096 });

  it('GETs the URL with the name unresolved, sends nothing that names the pool, and answers the body', async () => {
    const r = await through(`http://echo.testnet:${port}/ip`);
    expect(r).to.deep.equal({ ok: true, status: 200, body: '127.0.0.1\n' });
    expect(socks.requests.at(-1)).to.deep.include({ addressType: 'domain', host: 'echo.testnet', port });
    const req = seen.at(-1) as IncomingMessage;
    expect(Object.keys(req.headers).sort()).to.deep.equal(['accept', 'connection', 'host']);
    expect(req.headers.host).to.equal(`echo.testnet:${port}`);
  });

  it('fails with its own reason: a status, a size, a refusal, no SocksPort, a deadline, a scheme', async () => {
    expect(await through(`http://echo.testnet:${port}/busy`)).to.deep.include({ ok: false, failure: 'http', status: 503 });
    expect(await through(`http://echo.testnet:${port}/big`, { maxBytes: 100 })).to.deep.include({ ok: false, failure: 'too_large' });
    expect(await through(`http://nowhere.testnet:${port}/ip`)).to.deep.include({ ok: false, failure: 'socks', socksReply: 4 });
    expect(await through(`http://echo.testnet:${port}/slow`, { timeoutMs: 300 })).to.deep.include({ ok: false, failure: 'timeout' });
    // A port nothing listens on: the instance's SocksPort is not there (the tor process, not its exit).
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await through(`http://echo.testnet:${port}/ip`, { socksPort: deadPort })).to.deep.include({ ok: false, failure: 'dial' });
    expect(await through('ftp://echo.testnet/ip')).to.deep.include({ ok: false, failure: 'url' });
  });

  describe('over https', () => {
    let dir: string;
    let https: HttpsServer;
    let httpsPort: number;
    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'exitpool-tls-'));
      const key = path.join(dir, 'key.pem');
      const cert = path.join(dir, 'cert.pem');
      await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=echo.testnet', '-addext', 'subjectAltName=DNS:echo.testnet']);
      https = createTlsServer({ key: await readFile(key), cert: await readFile(cert) }, (_req, res) => res.end('127.0.0.1\n'));
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', () => resolve()));
      httpsPort = (https.address() as AddressInfo).port;
    });
    after(async () => {
      https.closeAllConnections();
      await new Promise<void>((resolve) => https.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    });

    it('refuses a certificate no authority vouches for: an exit cannot answer in the echo service’s place', async () => {
      const r = await through(`https://echo.testnet:${httpsPort}/ip`);
      expect(r).to.deep.include({ ok: false, failure: 'tls' });
      expect(r.ok === false && r.detail).to.match(/self.signed|certificate/i);
    });
  });
});
