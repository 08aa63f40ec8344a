/**
 * Issue 14, findings 5 and 8b, through the real service on the private network:
 * - connections that never authenticate cannot lock clients out (MAX_UNAUTHENTICATED_PER_WORKER:
 *   the oldest unauthenticated connection makes room for a new one; authenticated ones are kept);
 * - refused proxy credentials are logged at a bounded rate, each line counting the refusals
 *   since the previous one.
 */
import { expect } from 'chai';
import net from 'node:net';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { pollUntil } from '../support/waiting.js';
import { httpGetOverTunnel, openSocksTunnel } from '../support/clients/socks5-client.js';
import { parsePrometheusText, samplesOf } from '../support/parsers/prometheus-text.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

const BOUND = 200;
const FLOOD_PER_LISTENER = 250;

function openIdle(port: number, firstBytes: Buffer | null): Promise<net.Socket> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      if (firstBytes !== null) s.write(firstBytes);
      resolve(s);
    });
    s.on('error', () => resolve(s));
  });
}

/** Opens `n` sockets that never finish a handshake: silent ones and ones stuck half way. */
async function flood(port: number, n: number, partial: Buffer): Promise<net.Socket[]> {
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i += 25) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(25, n - i) }, (_, j) => openIdle(port, (i + j) % 2 === 0 ? null : partial)))));
  }
  return out;
}

describe('proxy listeners: connections that never authenticate, and refused credentials in the log (real service)', function () {
  this.timeout(240_000);
  let svc: RunningService;
  const sockets: net.Socket[] = [];

  before(async function () {
    this.timeout(240_000);
    svc = await startService({ POOL_SIZE: '2', PROXY_WORKERS: '1', MAX_CONNECTIONS_PER_WORKER: String(BOUND), LOG_LEVEL: 'info' });
    await svc.waitReady(2, 180_000);
  });

  after(async function () {
    this.timeout(60_000);
    for (const s of sockets) s.destroy();
    if (svc) expect(await svc.stop()).to.equal(0);
  });

  const metric = async (name: string): Promise<number> =>
    samplesOf(parsePrometheusText(await (await svc.api('/metrics')).text()), name).reduce((sum, s) => sum + s.value, 0);

  it('keeps serving authenticated clients on both listeners through a flood of idle unauthenticated connections', async () => {
    // An authenticated tunnel opened before the flood must survive it.
    const tunnel = await openSocksTunnel({ port: svc.socksPort, username: 'kept', password: TEST_PROXY_TOKEN, host: 'whoami.testnet', targetPort: svc.net.whoami.port, timeoutMs: 30_000 });
    expect(tunnel.kind).to.equal('open');
    if (tunnel.kind !== 'open') return;
    sockets.push(tunnel.socket);

    sockets.push(...(await flood(svc.socksPort, FLOOD_PER_LISTENER, Buffer.from([5, 1]))));
    sockets.push(...(await flood(svc.httpPort, FLOOD_PER_LISTENER, Buffer.from('GET http://whoami.testnet/ HTTP/1.1\r\nHost: whoami'))));
    // 500 unauthenticated connections against a bound of 200: the oldest made room for the newer ones.
    const evicted = await pollUntil('evictions counted', async () => {
      const n = await metric('pool_proxy_connections_evicted_total');
      return n >= 2 * FLOOD_PER_LISTENER - BOUND ? n : undefined;
    }, 15_000, 200);
    expect(evicted).to.be.at.least(2 * FLOOD_PER_LISTENER - BOUND);
    expect(await metric('pool_proxy_worker_connections'), 'the worker is full').to.equal(BOUND);

    // While the newest flood connections still hold the worker, real clients are served, repeatedly.
    for (let i = 0; i < 4; i++) {
      const viaSocks = await curlSocks(svc.socksPort, `flooded-${i}`, TEST_PROXY_TOKEN, svc.whoamiUrl);
      expect(viaSocks.code, `SOCKS5 request ${i}: ${viaSocks.stderr}`).to.equal(0);
      expect(viaSocks.stdout).to.match(/127\.\d+\.\d+\.\d+/);
      const viaHttp = await curlHttp(svc.httpPort, `flooded-${i}`, TEST_PROXY_TOKEN, svc.whoamiUrl);
      expect(viaHttp.code, `HTTP request ${i}: ${viaHttp.stderr}`).to.equal(0);
      expect(viaHttp.stdout).to.match(/127\.\d+\.\d+\.\d+/);
    }
    // The authenticated tunnel was never evicted: it still carries a request.
    const overTunnel = await httpGetOverTunnel(tunnel.socket, `whoami.testnet:${svc.net.whoami.port}`, '/', 30_000);
    expect(overTunnel.status).to.equal(200);
    expect(await metric('pool_proxy_connections_refused_total'), 'nobody was refused: idle sockets made room').to.equal(0);
    for (const s of sockets.splice(0)) s.destroy();
  });

  it('logs 3,000 refused credentials in a bounded number of lines that count them all', async () => {
    const before = svc.output().length;
    const attempts = 3000;
    const badSocks = (): Promise<void> =>
      new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port: svc.socksPort }, () => {
          const user = Buffer.from('k');
          const pass = Buffer.from('tp_wrongwrongwrongwrong00');
          s.write(Buffer.concat([Buffer.from([5, 1, 2, 1, user.length]), user, Buffer.from([pass.length]), pass]));
        });
        s.on('error', () => undefined);
        s.on('close', () => resolve());
        s.resume();
      });
    const badHttp = (): Promise<void> =>
      new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port: svc.httpPort }, () => {
          const auth = Buffer.from('k:tp_wrongwrongwrongwrong00').toString('base64');
          s.write(`GET http://whoami.testnet/ HTTP/1.1\r\nHost: whoami.testnet\r\nProxy-Authorization: Basic ${auth}\r\nConnection: close\r\n\r\n`);
        });
        s.on('error', () => undefined);
        s.on('close', () => resolve());
        s.resume();
      });
    for (let i = 0; i < attempts; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => ((i + j) % 2 === 0 ? badSocks() : badHttp())));
    }
    const burst = svc.output().slice(before);
    const lines = burst.split('\n').filter((l) => l.includes('credential refused'));
    expect(lines.length, 'a few lines, not one per attempt').to.be.within(1, 4);
    expect(Buffer.byteLength(burst), 'bounded log output').to.be.below(8 * 1024);
    for (const l of lines) expect(l).to.match(/\bwarn\b/).and.to.match(/occurrences=\d+/).and.not.include('tp_wrong');

    // Shutdown writes what is still counted: the lines add up to every attempt.
    expect(await svc.stop()).to.equal(0);
    const all = svc.output().slice(before).split('\n').filter((l) => l.includes('credential refused'));
    const total = all.reduce((sum, l) => sum + Number(/occurrences=(\d+)/.exec(l)?.[1] ?? 0), 0);
    expect(total).to.equal(attempts);
  });
});
