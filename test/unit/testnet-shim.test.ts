import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import winston from 'winston';
import { findRepoRoot } from '../../internal/testnet/repo-root.js';
import { ensureShimBuilt } from '../../internal/testnet/shim-build.js';
import { isShimMapped } from '../../internal/testnet/shim-check.js';

const silent = winston.createLogger({ silent: true });

/**
 * Runs in a child Node with the shim preloaded. It checks the shim is mapped BEFORE trying any
 * non-loopback destination, so a broken preload can never let a probe leave the machine.
 */
const PROBE_SCRIPT = `
import { readFileSync } from 'node:fs';
import net from 'node:net';
import dgram from 'node:dgram';
const maps = readFileSync('/proc/self/maps', 'utf8');
if (!maps.includes(process.env.SHIM_PATH)) { console.log(JSON.stringify({ mapped: false })); process.exit(3); }
const tcp = (host, port) => new Promise((resolve) => {
  const s = net.connect({ host, port });
  s.once('connect', () => s.once('data', (d) => { s.destroy(); resolve({ ok: true, seen: d.toString().trim() }); }));
  s.once('error', (e) => resolve({ ok: false, code: e.code }));
});
const udp = (type, host, port) => new Promise((resolve) => {
  const s = dgram.createSocket(type);
  s.send(Buffer.from('probe'), port, host, (err) => { s.close(); resolve(err ? { ok: false, code: err.code } : { ok: true }); });
});
const tcpPort = Number(process.env.TCP_PORT);
const udpPort = Number(process.env.UDP_PORT);
const result = { mapped: true, loopback: await tcp('127.0.0.1', tcpPort) };
if (process.env.PROBE_OUTSIDE === '1') {
  Object.assign(result, {
    mappedLoopback: await tcp('::ffff:127.0.0.1', tcpPort),
    ipv6Loopback: await tcp('::1', tcpPort),
    outside4: await tcp('192.0.2.1', 9),
    outside6: await tcp('2001:db8::1', 9),
    mappedOutside: await tcp('::ffff:192.0.2.1', 9),
    udpOutside: await udp('udp4', '192.0.2.1', 9),
    udpLoopback: await udp('udp4', '127.0.0.1', udpPort),
  });
}
console.log(JSON.stringify(result));
`;

interface ProbeOutcome {
  readonly ok: boolean;
  readonly seen?: string;
  readonly code?: string;
}

interface ProbeResult {
  readonly mapped: boolean;
  readonly [probe: string]: ProbeOutcome | boolean;
}

function runProbe(env: NodeJS.ProcessEnv): Promise<{ result: ProbeResult; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', PROBE_SCRIPT], { env: { PATH: process.env.PATH, ...env }, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && !stdout) {
        reject(new Error(`probe failed: ${err.message}\n${stderr}`));
        return;
      }
      resolve({ result: JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as ProbeResult, stderr });
    });
  });
}

function outcome(result: ProbeResult, key: string): ProbeOutcome {
  const value = result[key];
  if (typeof value !== 'object') throw new Error(`probe ${key} missing`);
  return value;
}

describe('testnet loopback shim (LD_PRELOAD)', function () {
  this.timeout(60_000);
  let shim: string;
  let tcpServer: Server;
  let udpServer: UdpSocket;
  let tcpPort: number;
  let udpPort: number;

  before(async () => {
    const repoRoot = findRepoRoot();
    shim = await ensureShimBuilt(repoRoot, path.join(repoRoot, '.testnet', '.shim-cache'), silent);
    // Answers every connection with the source address it saw, IPv4-mapped form normalised.
    tcpServer = createServer((socket) => socket.end(`${(socket.remoteAddress ?? '').replace(/^::ffff:/, '')}\n`));
    await new Promise<void>((resolve) => tcpServer.listen(0, '127.0.0.1', () => resolve()));
    const address = tcpServer.address();
    tcpPort = typeof address === 'object' && address ? address.port : 0;
    udpServer = createSocket('udp4');
    await new Promise<void>((resolve) => udpServer.bind(0, '127.0.0.1', () => resolve()));
    udpPort = udpServer.address().port;
  });

  after(async () => {
    await new Promise<void>((resolve) => tcpServer.close(() => resolve()));
    await new Promise<void>((resolve) => udpServer.close(() => resolve()));
  });

  it('is built once and reused while its source is unchanged', async () => {
    const repoRoot = findRepoRoot();
    const mtime = statSync(shim).mtimeMs;
    const again = await ensureShimBuilt(repoRoot, path.join(repoRoot, '.testnet', '.shim-cache'), silent);
    expect(again).to.equal(shim);
    expect(statSync(again).mtimeMs).to.equal(mtime);
  });

  it('binds IPv4 TCP connections to EXITPOOL_SHIM_BIND_IPV4, which nothing else does', async () => {
    const shimmed = await runProbe({ LD_PRELOAD: shim, SHIM_PATH: shim, EXITPOOL_SHIM_BIND_IPV4: '127.0.0.13', TCP_PORT: String(tcpPort), UDP_PORT: String(udpPort) });
    expect(shimmed.result.mapped).to.equal(true);
    expect(outcome(shimmed.result, 'loopback')).to.deep.equal({ ok: true, seen: '127.0.0.13' });
    const plain = await runProbe({ SHIM_PATH: '/nonexistent-so-the-probe-stops-before-any-traffic', TCP_PORT: String(tcpPort) });
    expect(plain.result.mapped).to.equal(false);
  });

  it('binds exit traffic (ports outside EXITPOOL_SHIM_RELAY_PORTS) to EXITPOOL_SHIM_EXIT_BIND_IPV4, and the network ports to the relay address', async () => {
    const base = { LD_PRELOAD: shim, SHIM_PATH: shim, EXITPOOL_SHIM_BIND_IPV4: '127.0.0.13', EXITPOOL_SHIM_EXIT_BIND_IPV4: '127.21.0.8', TCP_PORT: String(tcpPort), UDP_PORT: String(udpPort) };
    const exitTraffic = await runProbe({ ...base, EXITPOOL_SHIM_RELAY_PORTS: `${tcpPort + 1}-${tcpPort + 50}` });
    expect(outcome(exitTraffic.result, 'loopback')).to.deep.equal({ ok: true, seen: '127.21.0.8' });
    const relayTraffic = await runProbe({ ...base, EXITPOOL_SHIM_RELAY_PORTS: `${tcpPort}-${tcpPort}` });
    expect(outcome(relayTraffic.result, 'loopback')).to.deep.equal({ ok: true, seen: '127.0.0.13' });
    const noRange = await runProbe({ ...base });
    expect(outcome(noRange.result, 'loopback'), 'without a range every port is exit traffic').to.deep.equal({ ok: true, seen: '127.21.0.8' });
  });

  it('refuses TCP and UDP to non-loopback IPv4, IPv6 and v4-mapped addresses before the syscall, and allows loopback', async () => {
    const { result, stderr } = await runProbe({
      LD_PRELOAD: shim,
      SHIM_PATH: shim,
      TCP_PORT: String(tcpPort),
      UDP_PORT: String(udpPort),
      PROBE_OUTSIDE: '1',
    });
    expect(result.mapped).to.equal(true);
    expect(outcome(result, 'loopback')).to.deep.equal({ ok: true, seen: '127.0.0.1' });
    expect(outcome(result, 'mappedLoopback').ok).to.equal(true);
    // Nothing listens on [::1]: refused by the kernel (so let through by the shim), not unreachable.
    expect(outcome(result, 'ipv6Loopback')).to.deep.equal({ ok: false, code: 'ECONNREFUSED' });
    for (const key of ['outside4', 'outside6', 'mappedOutside', 'udpOutside']) {
      expect(outcome(result, key), key).to.deep.equal({ ok: false, code: 'ENETUNREACH' });
    }
    expect(outcome(result, 'udpLoopback').ok).to.equal(true);
    // The refusal lines prove the shim, not the kernel's routing, stopped each attempt.
    expect(stderr).to.include('refused connect to non-loopback 192.0.2.1');
    expect(stderr).to.include('refused connect to non-loopback 2001:db8::1');
    expect(stderr).to.include('refused connect to non-loopback ::ffff:192.0.2.1');
    expect(stderr).to.match(/refused send(msg|mmsg|to) to non-loopback 192\.0\.2\.1/);
  });

  it('is reported as mapped only into processes that really loaded it', async () => {
    expect(await isShimMapped(process.pid, shim)).to.equal(false);
  });
});
