/**
 * Issue 14, findings 4, 9 and 8d, through the real CLI on the private network: SIGTERM drains,
 * start-up fails fast with one line naming the setting, /health tells when the proxy listeners are
 * down, bare country codes in TOR_EXIT_NODES, the .env file, and no secret in the environment of
 * workers and tor processes.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { curlHttp, curlSocks, type CurlResult } from '../support/clients/curl.js';
import { childPids, processRole } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN, startService, type RunningService, serviceEnv } from '../support/fixtures/service.js';
import { servicePorts } from '../support/network/free-ports.js';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'supervisor', 'cli.js');

/** Runs the CLI to its exit; for services that must refuse to start. */
async function runCli(env: Record<string, string>, cwd = process.cwd(), timeoutMs = 60_000): Promise<{ code: number | null; output: string; ms: number }> {
  const testnet = await sharedTestnet();
  const ports = await servicePorts(4);
  const started = Date.now();
  const child = spawn(process.execPath, [CLI], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: serviceEnv(testnet, ports, { POOL_SIZE: '1', SPAWN_STAGGER: undefined, ...env }),
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output, ms: Date.now() - started };
}

function expectOneClearLine(r: { code: number | null; output: string }, setting: string): void {
  expect(r.code, r.output).to.equal(78);
  const lines = r.output.split('\n').filter((l) => l.startsWith('exitpool: cannot start'));
  expect(lines, r.output).to.have.length(1);
  expect(lines[0]).to.include(setting);
  expect(r.output, 'no stack trace').to.not.match(/^\s+at /m);
  expect(r.output, 'no crash loop').to.not.include('re-forking');
}

/** Every descendant of pid. */
function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const c of childPids(pid)) out.push(c, ...descendants(c));
  return out;
}

describe('service lifecycle (real CLI, private network)', function () {
  this.timeout(240_000);

  describe('SIGTERM drains open requests', () => {
    let svc: RunningService;
    before(async function () {
      this.timeout(240_000);
      svc = await startService({ POOL_SIZE: '2', SHUTDOWN_GRACE: '12s' });
      await svc.waitReady(2, 180_000);
    });
    after(async () => {
      if (svc) await svc.stop();
    });

    it('lets requests that need a few more seconds finish, cuts one longer than the grace, records no failure, exits 0', async () => {
      const slow = `${svc.whoamiUrl}slow?ms=5000`;
      const hitsBefore = [...svc.net.whoami.hitsBySource().values()].reduce((a, b) => a + b, 0);
      const requests: Promise<CurlResult>[] = [
        curlSocks(svc.socksPort, 'drain-a', TEST_PROXY_TOKEN, slow),
        curlSocks(svc.socksPort, 'drain-b', TEST_PROXY_TOKEN, slow),
        curlHttp(svc.httpPort, 'drain-a', TEST_PROXY_TOKEN, slow),
        curlHttp(svc.httpPort, 'drain-b', TEST_PROXY_TOKEN, slow),
      ];
      const tooLong = curlSocks(svc.socksPort, 'drain-long', TEST_PROXY_TOKEN, `${svc.whoamiUrl}slow?ms=60000`);
      // Every request has reached the destination: they are in flight through tor.
      await pollUntil('requests in flight', () => ([...svc.net.whoami.hitsBySource().values()].reduce((a, b) => a + b, 0) - hitsBefore >= 5 ? true : undefined), 30_000, 50);
      const stoppedAt = Date.now();
      const stopping = svc.stop();
      const results = await Promise.all(requests);
      for (const [i, r] of results.entries()) {
        expect(r.code, `request ${i} finished during the drain: ${r.stderr}`).to.equal(0);
        expect(r.stdout).to.match(/^127\.\d+\.\d+\.\d+\s*$/);
      }
      const cut = await tooLong;
      expect(cut.code, 'the request longer than the grace was cut').to.not.equal(0);
      const cutAfter = Date.now() - stoppedAt;
      expect(cutAfter, 'cut at the grace, not at once').to.be.at.least(10_000);
      expect(await stopping).to.equal(0);
      const out = svc.output();
      expect(out).to.include('stopping: proxies drain open connections');
      expect(out).to.not.match(/quarantined|remediation/);
    });
  });

  describe('start-up fails fast and says why', () => {
    it('a port already in use: exit 78 with one line naming API_PORT', async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      const port = (blocker.address() as net.AddressInfo).port;
      try {
        const r = await runCli({ API_PORT: String(port) });
        expectOneClearLine(r, 'API_PORT');
        expect(r.output).to.include(`127.0.0.1:${port} is already in use`);
      } finally {
        blocker.close();
      }
    });

    it('an unresolvable BIND_HOST: exit 78 naming BIND_HOST', async () => {
      expectOneClearLine(await runCli({ BIND_HOST: 'no-such-host.invalid' }), 'BIND_HOST');
    });

    it('a tor binary that does not exist: exit 78 naming TOR_BINARY, no instance started', async () => {
      const r = await runCli({ TOR_BINARY: '/nonexistent/tor' });
      expectOneClearLine(r, 'TOR_BINARY');
      expect(r.output).to.not.include('tor started');
    });

    it('reads ./.env for variables the environment does not set, and the environment wins', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-envfile-'));
      fs.writeFileSync(path.join(dir, '.env'), '# settings\nMIN_READY=0\nSESSION_TTL="not a duration"\n');
      const fromFile = await runCli({}, dir);
      expect(fromFile.code).to.equal(78);
      expect(fromFile.output).to.include('MIN_READY').and.to.include('SESSION_TTL');
      // With both set in the environment, the file loses: the start goes on to the tor check.
      const envWins = await runCli({ MIN_READY: '1', SESSION_TTL: '5m', TOR_BINARY: '/nonexistent/tor' }, dir);
      expectOneClearLine(envWins, 'TOR_BINARY');
      fs.rmSync(dir, { recursive: true, force: true });
    });
  });

  describe('a running service', () => {
    let svc: RunningService;
    before(async function () {
      this.timeout(240_000);
      svc = await startService({ POOL_SIZE: '2', TOR_EXIT_NODES: 'de,nl', TOR_STRICT_NODES: 'true' });
      await svc.waitReady(2, 180_000);
    });
    after(async () => {
      if (svc) await svc.stop();
    });

    it('reads TOR_EXIT_NODES=de,nl as countries: every exit is in Germany or the Netherlands', async () => {
      const allowed = new Set(svc.net.exits.filter((x) => x.egressCountry === 'de' || x.egressCountry === 'nl').map((x) => x.egressAddress));
      expect(allowed.size).to.equal(2);
      for (let i = 0; i < 6; i++) {
        const r = await curlSocks(svc.socksPort, `country-${i}`, TEST_PROXY_TOKEN, svc.whoamiUrl);
        expect(r.code, r.stderr).to.equal(0);
        expect(allowed.has(r.stdout.trim()), `exit ${r.stdout.trim()}`).to.equal(true);
      }
    });

    it('no worker or tor process holds ADMIN_PASSWORD or PROXY_TOKEN in its environment', () => {
      const pids = descendants(svc.pid);
      const roles = pids.map((p) => processRole(p));
      expect(roles.filter((r) => r === 'proxy').length, 'proxy workers found').to.be.at.least(1);
      expect(roles.filter((r) => r === 'api').length, 'API worker found').to.equal(1);
      expect(pids.length - roles.filter((r) => r !== null).length, 'tor processes found').to.be.at.least(2);
      for (const pid of pids) {
        let environ: string;
        try {
          environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
        } catch {
          continue; // ended meanwhile
        }
        expect(environ, `pid ${pid}`).to.not.include('ADMIN_PASSWORD=').and.not.include('PROXY_TOKEN=');
        expect(environ, `pid ${pid}`).to.not.include(TEST_PROXY_TOKEN).and.not.include(TEST_ADMIN_PASSWORD);
      }
    });

    it('/health answers 503 while no proxy worker is listening, and 200 again after', async () => {
      const seen = await pollUntil('a 503 naming the proxy listeners', async () => {
        // Kill every proxy worker; their re-fork delay doubles with each quick death.
        for (const pid of descendants(svc.pid).filter((p) => processRole(p) === 'proxy')) process.kill(pid, 'SIGKILL');
        for (let i = 0; i < 10; i++) {
          const r = await svc.api('/health');
          const text = await r.text();
          if (r.status === 503 && /proxy listeners are not up/.test(text)) return text;
          await new Promise((res) => setTimeout(res, 20));
        }
        return undefined;
      }, 60_000, 100);
      expect(seen).to.match(/proxy listeners are not up/);
      await pollUntil('healthy again', async () => ((await svc.api('/health')).status === 200 ? true : undefined), 60_000, 200);
    });
  });
});
