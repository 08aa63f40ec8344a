import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CAPTCHA_MARKER,
  EXIT_DNS_TIMEOUT_MS,
  fetchDirectoryDocument,
  findRepoRoot,
  isShimMapped,
  liveTorsOfRun,
  RATE_LIMIT_RETRY_AFTER_SECONDS,
  reapStaleRuns,
  startTestnet,
  TESTNET_ROOT_DIR,
  WHOAMI_JSON_PATH,
  type Testnet,
  type WhoamiJson,
} from '../../internal/testnet/index.js';
import { isProcessAlive, processCommandLine } from '../../shared/process/foreign-processes.js';
import { AUTHORITY_COUNT, DEFAULT_EXIT_COUNTRIES, DEFAULT_EXITS, DEFAULT_RELAYS } from '../../internal/testnet/topology.js';
import { childLogger } from '../../shared/logger.js';
import { startTestnetClient, type TestnetClient } from '../support/clients/testnet-tor-client.js';
import { curlThroughSocks, type CurlResponse } from '../support/clients/curl.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import type { OrphanChildReport } from '../support/processes/testnet-orphan-child.js';
import { FOREIGN_SIGTERM_LISTENER_ARG } from '../support/processes/orphan-child-flags.js';

/** Every tor of a network started with the defaults. */
const DEFAULT_NETWORK_TORS = AUTHORITY_COUNT + DEFAULT_RELAYS + DEFAULT_EXITS;
import { waitAllGone } from '../support/processes/inspection.js';

const log = childLogger({ component: 'e2e-testnet' });
const CLIENT_BOOTSTRAP_TIMEOUT_MS = 120_000;
/** With 4 exits, 16 fresh usernames all landing on one exit has odds of about 4^-16. */
const MAX_USERNAMES_FOR_A_DIFFERENT_EXIT = 16;
const CURL_SOCKS_FAILURE = 97;
const CURL_EMPTY_REPLY = 52;
const CURL_RECV_ERROR = 56;

describe('private Tor network on loopback (e2e)', function () {
  this.timeout(120_000);
  let net: Testnet;
  let clientA: TestnetClient | undefined;
  let clientB: TestnetClient | undefined;
  /** Each client's sticky SOCKS username and the exit address it was seen from. */
  let alice: { username: string; ip: string };
  let bob: { username: string; ip: string };

  function clients(): [TestnetClient, TestnetClient] {
    if (!clientA || !clientB) throw new Error('clients not started');
    return [clientA, clientB];
  }

  async function whoamiVia(client: TestnetClient, username: string, urlPath = '/'): Promise<CurlResponse> {
    return curlThroughSocks(client.socksPort, net.whoami.url(urlPath), { username });
  }

  async function exitIpOf(client: TestnetClient, username: string): Promise<string> {
    const result = await whoamiVia(client, username);
    expect(result.exitCode, `curl via ${client.name} as ${username}: ${result.stderr}`).to.equal(0);
    expect(result.httpStatus).to.equal(200);
    const ip = result.body.trim();
    expect(net.exits.map((e) => e.egressAddress), `source ${ip} is one of the exits`).to.include(ip);
    return ip;
  }

  before(async function () {
    this.timeout(300_000);
    const waited = Date.now();
    net = await sharedTestnet();
    log.info('shared network ready', { usableAfterMs: net.usableAfterMs, waitedMs: Date.now() - waited });
    [clientA, clientB] = await Promise.all([startTestnetClient(net, 'e2e-a'), startTestnetClient(net, 'e2e-b')]);
    const [bootA, bootB] = await Promise.all([clientA.waitBootstrapped(CLIENT_BOOTSTRAP_TIMEOUT_MS), clientB.waitBootstrapped(CLIENT_BOOTSTRAP_TIMEOUT_MS)]);
    log.info('clients bootstrapped', { clientA: bootA, clientB: bootB });
  });

  after(async function () {
    this.timeout(30_000);
    await Promise.all([clientA?.stop(), clientB?.stop()]);
  });

  it('runs every tor of the network with the loopback shim mapped', async () => {
    expect(net.pids).to.have.length(net.nodes.length);
    for (const pid of net.pids) {
      expect(isProcessAlive(pid), `pid ${pid} alive`).to.equal(true);
      expect(await isShimMapped(pid, net.shimLibrary), `shim mapped into ${pid}`).to.equal(true);
    }
    for (const client of clients()) expect(await isShimMapped(client.tor.pid, net.shimLibrary)).to.equal(true);
  });

  it('gives every exit, and the address its traffic leaves from, its configured country through the custom GeoIP file (GETINFO ip-to-country)', async () => {
    const [a] = clients();
    expect(net.exits.length).to.be.at.least(4);
    for (const exit of net.exits) {
      expect(await a.control.getInfo(`ip-to-country/${exit.address}`), exit.nickname).to.equal(exit.country);
      expect(await a.control.getInfo(`ip-to-country/${exit.egressAddress}`), `${exit.nickname}'s egress address`).to.equal(exit.egressCountry);
      const status = await a.control.getInfo(`ns/id/${exit.fingerprint}`);
      expect(status, `consensus entry of ${exit.nickname}`).to.match(new RegExp(`^r ${exit.nickname} \\S+ .* ${exit.address.replace(/\./g, '\\.')} \\d+ `, 'm'));
    }
    expect(new Set(net.exits.map((e) => e.country)).size, 'distinct countries').to.equal(new Set(DEFAULT_EXIT_COUNTRIES.slice(0, net.exits.length)).size);
    expect(await a.control.getInfo('ip-to-country/127.0.0.1')).to.equal('??');
  });

  it('sends every exit\'s traffic from the address it publishes (the egress tests start a network that does not)', () => {
    for (const exit of net.exits) expect([exit.egressAddress, exit.egressCountry], exit.nickname).to.deep.equal([exit.address, exit.country]);
  });

  it("gives the exits a DNS timeout far above tor's 1 s, in the consensus the authorities publish (exit_dns_timeout)", async () => {
    for (const authority of net.nodes.filter((n) => n.role === 'authority')) {
      const res = await fetchDirectoryDocument(authority.address, authority.dirPort, '/tor/status-vote/current/consensus-microdesc', 10_000);
      expect(res.status, authority.nickname).to.equal(200);
      const params = res.body.split('\n').find((l) => l.startsWith('params '));
      expect(params?.split(' '), `params of ${authority.nickname}'s consensus`).to.include(`exit_dns_timeout=${EXIT_DNS_TIMEOUT_MS}`);
    }
  });

  it('lets two clients reach whoami.testnet through two different exits, each keeping its exit', async () => {
    const [a, b] = clients();
    alice = { username: 'alice', ip: await exitIpOf(a, 'alice') };
    let candidate = { username: 'bob-0', ip: await exitIpOf(b, 'bob-0') };
    for (let i = 1; candidate.ip === alice.ip && i < MAX_USERNAMES_FOR_A_DIFFERENT_EXIT; i++) {
      candidate = { username: `bob-${i}`, ip: await exitIpOf(b, `bob-${i}`) };
    }
    bob = candidate;
    log.info('exits seen by the destination', { alice, bob });
    expect(bob.ip, 'the two clients leave from different exits').to.not.equal(alice.ip);
    // ConfluxEnabled 0: a username stays on its circuit, so on its exit.
    for (let i = 0; i < 3; i++) {
      expect(await exitIpOf(a, alice.username)).to.equal(alice.ip);
      expect(await exitIpOf(b, bob.username)).to.equal(bob.ip);
    }
    const json = await whoamiVia(a, alice.username, WHOAMI_JSON_PATH);
    expect(json.httpStatus).to.equal(200);
    const body = JSON.parse(json.body) as WhoamiJson;
    expect(body.ip).to.equal(alice.ip);
    expect(body.host).to.equal(`whoami.testnet:${net.whoami.port}`);
    expect(net.whoami.hits(alice.ip)).to.be.at.least(5);
  });

  it('answers one exit with 403, captcha, 429 and a reset while the other exit is served normally', async () => {
    const [a, b] = clients();
    const hitsBefore = net.whoami.hits(alice.ip);
    try {
      net.whoami.setBehaviour(alice.ip, 'forbidden');
      const forbidden = await whoamiVia(a, alice.username);
      expect(forbidden.httpStatus).to.equal(403);
      const other = await whoamiVia(b, bob.username);
      expect(other.httpStatus).to.equal(200);
      expect(other.body.trim()).to.equal(bob.ip);

      net.whoami.setBehaviour(alice.ip, 'captcha');
      const captcha = await whoamiVia(a, alice.username);
      expect(captcha.httpStatus).to.equal(200);
      expect(captcha.body).to.include(CAPTCHA_MARKER);

      net.whoami.setBehaviour(alice.ip, 'rate_limited');
      const limited = await whoamiVia(a, alice.username);
      expect(limited.httpStatus).to.equal(429);
      expect(limited.headers).to.match(new RegExp(`^retry-after: ${RATE_LIMIT_RETRY_AFTER_SECONDS}$`, 'im'));

      net.whoami.setBehaviour(alice.ip, 'reset');
      const reset = await whoamiVia(a, alice.username);
      expect(reset.httpStatus, 'no HTTP answer after a reset').to.equal(undefined);
      expect([CURL_EMPTY_REPLY, CURL_RECV_ERROR]).to.include(reset.exitCode);
    } finally {
      net.whoami.clearBehaviours();
    }
    expect(net.whoami.hits(alice.ip) - hitsBefore, 'each request counted, the reset one included').to.equal(4);
    expect(await exitIpOf(a, alice.username), 'served normally again on the same exit').to.equal(alice.ip);
  });

  it('fails unknown names fast and refuses non-loopback destinations at the exit, and the client keeps working', async () => {
    const [, b] = clients();
    const unknown = await curlThroughSocks(b.socksPort, 'http://no-such-host.invalid/', { username: 'probe-nxdomain', maxTimeSeconds: 20 });
    expect(unknown.exitCode, unknown.stderr).to.equal(CURL_SOCKS_FAILURE);
    expect(unknown.durationMs, 'NXDOMAIN from the DNS responder, not a resolver timeout').to.be.below(10_000);

    const outside = await curlThroughSocks(b.socksPort, 'http://192.0.2.1/', { username: 'probe-outside', maxTimeSeconds: 30 });
    expect(outside.exitCode, outside.stderr).to.equal(CURL_SOCKS_FAILURE);
    const refusals = net.nodes
      .filter((n) => n.role === 'exit')
      .map((n) => readFileSync(path.join(net.workDir, n.nickname, 'stdout.log'), 'utf8'))
      .join('\n');
    expect(refusals, 'the shim refused the connect inside an exit').to.include('exitpool-shim: refused connect to non-loopback 192.0.2.1');

    const after = await whoamiVia(b, 'probe-after');
    expect(after.httpStatus).to.equal(200);
    expect(net.exits.map((e) => e.egressAddress)).to.include(after.body.trim());
  });
});

describe('private Tor network teardown (e2e)', function () {
  this.timeout(120_000);
  const here = path.dirname(fileURLToPath(import.meta.url));
  const orphanScript = path.join(here, '..', 'support', 'processes', 'testnet-orphan-child.js');
  let child: ChildProcess | undefined;
  let childReport: OrphanChildReport | undefined;

  function startOrphanChild(args: readonly string[] = []): Promise<OrphanChildReport> {
    return new Promise((resolve, reject) => {
      const proc = spawn(process.execPath, [orphanScript, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      child = proc;
      let stdout = '';
      let stderr = '';
      proc.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
      });
      proc.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
        const line = stdout.split('\n')[0];
        if (stdout.includes('\n') && line) {
          childReport = JSON.parse(line) as OrphanChildReport;
          resolve(childReport);
        }
      });
      proc.once('exit', (code, signal) => reject(new Error(`network child exited early (${String(code)}/${String(signal)}):\n${stderr}`)));
    });
  }

  /** The notice log of a live tor of the network, found from the torrc on its command line. */
  function noticeLogOf(pid: number): string {
    const argv = processCommandLine(pid) ?? [];
    const torrc = argv[argv.indexOf('-f') + 1];
    if (!argv.includes('-f') || !torrc) return `(no torrc on the command line of ${pid}: ${argv.join(' ')})`;
    const file = path.join(path.dirname(torrc), 'notice.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : `(no ${file})`;
  }

  function waitForExit(proc: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) resolve({ code: proc.exitCode, signal: proc.signalCode });
      else proc.once('exit', (code, signal) => resolve({ code, signal }));
    });
  }

  afterEach(() => {
    // Whatever a failed assertion left behind: the child, then any tor of its run.
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (childReport) {
      for (const pid of liveTorsOfRun(childReport.workDir)) process.kill(pid, 'SIGKILL');
    }
    child = undefined;
    childReport = undefined;
  });

  it('stop() ends every tor of the network (checked by PID) and removes its work dir', async () => {
    const net = await startTestnet();
    const pids = [...net.pids];
    expect(pids).to.have.length(DEFAULT_NETWORK_TORS);
    for (const pid of pids) expect(isProcessAlive(pid)).to.equal(true);
    await net.stop();
    expect(pids.filter((pid) => isProcessAlive(pid)), 'tors alive after stop()').to.deep.equal([]);
    expect(existsSync(net.workDir)).to.equal(false);
    expect(net.stopped).to.equal(true);
    await net.stop(); // idempotent
  });

  for (const [why, args] of [
    ['', []],
    [', also when a library listens for SIGTERM too (playwright closing its browsers)', [FOREIGN_SIGTERM_LISTENER_ARG]],
  ] as const) {
    it(`kills the tors at once when the owning Node process is terminated by a signal${why}`, async () => {
      const report = await startOrphanChild(args);
      expect(report.pids).to.have.length(DEFAULT_NETWORK_TORS);
      for (const pid of report.pids) expect(isProcessAlive(pid)).to.equal(true);
      const proc = child;
      if (!proc) throw new Error('no child');
      proc.kill('SIGTERM');
      const exit = await waitForExit(proc);
      expect(exit.code, 'exit code of a SIGTERMed process').to.equal(143);
      expect(await waitAllGone(report.pids, 3_000), 'tors alive after the owner ended').to.deep.equal([]);
      expect(existsSync(report.workDir), 'work dir removed by the exit hook').to.equal(false);
    });
  }

  it('lets tors of a SIGKILLed Node process exit on their own (__OwningControllerProcess) and reaps the run', async () => {
    const report = await startOrphanChild();
    const proc = child;
    if (!proc) throw new Error('no child');
    proc.kill('SIGKILL');
    await waitForExit(proc);
    const killedAt = Date.now();
    const survivors = await waitAllGone(report.pids, 60_000);
    log.info('orphaned tors gone', { afterMs: Date.now() - killedAt, survivors });
    // tor polls its owner every 15 s and then leaves; about one tor in 500 (tor 0.4.9) hangs in its
    // own exit path after saying so (main thread in a futex wait). Such a tor must still have
    // noticed the loss by itself; the reaper below is what ends it (internal/testnet/README.md).
    for (const pid of survivors) {
      expect(noticeLogOf(pid), `tor ${pid} outlived its owner without noticing`).to.include('Owning controller process has vanished');
    }
    // The SIGKILLed owner could not clean up; the next start anywhere in this repo (this call, or a
    // concurrent test run that got there first) reaps its run.
    await reapStaleRuns(path.join(findRepoRoot(), TESTNET_ROOT_DIR), log);
    expect(existsSync(report.workDir), 'stale run reaped').to.equal(false);
    expect(await waitAllGone(report.pids, 10_000), 'tors alive after the reaper').to.deep.equal([]);
  });
});
