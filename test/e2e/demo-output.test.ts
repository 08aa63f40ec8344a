/**
 * Issue 14, finding 10: `exitpool demo` reads clean; issue 36: its banner comes once the proxies
 * serve, and the instances' progress after it is at debug. Started as a newcomer would (its own private
 * network), stopped with Ctrl-C as a terminal sends it (SIGINT to the whole process group): no
 * tor warning a private network always prints, no tor exiting under the service, no state file
 * that cannot be written, exit 0.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pollUntil } from '../support/waiting.js';
import { servicePorts } from '../support/network/free-ports.js';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'exitpool');

describe('demo: its output reads clean (bin/exitpool demo, its own private network)', function () {
  this.timeout(240_000);

  it('starts without private-network warnings and stops on Ctrl-C in order', async () => {
    const ports = await servicePorts(4);
    const child = spawn(process.execPath, [BIN, 'demo'], {
      // Its own process group, like a shell job: the group gets the SIGINT, as from a terminal.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/root',
        SOCKS_PORT: String(ports.socks),
        HTTP_PORT: String(ports.http),
        API_PORT: String(ports.api),
        INSTANCE_PORT_BASE: String(ports.instanceBase),
        EXITPOOL_PRIVATE_NETWORK_ONLY: '1',
      },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      // A demo that refuses to start fails here with what it said, not after the whole timeout.
      const banner = await pollUntil(
        'the demo banner',
        () => (out.includes('exitpool demo is running') ? 'running' : child.exitCode !== null ? 'exited' : undefined),
        180_000,
        200,
      );
      expect(banner, `the demo exited before its banner:\n${out}`).to.equal('running');
      // Issue 36: the banner comes once the proxies serve, so its curl lines work at once.
      const bannerAt = out.indexOf('exitpool demo is running');
      const servingAt = out.search(/ info +serving /);
      expect(servingAt, out).to.be.within(0, bannerAt);
      // The demo shows each instance on its own exit IP, each in its own /24.
      const exitLines = await pollUntil('the exits printed', () => {
        const lines = out.split('\n').filter((l) => /^ {4}instance \d+ {2}127\./.test(l));
        return lines.length >= 4 ? lines : undefined;
      }, 60_000, 200);
      const ips = exitLines.map((l) => l.trim().split(/\s+/)[2] ?? '');
      expect(new Set(ips).size, exitLines.join('\n')).to.equal(4);
      expect(new Set(ips.map((ip) => ip.split('.').slice(0, 3).join('.'))).size, exitLines.join('\n')).to.equal(4);
      // The spares (WARM_SPARES's default) are printed apart, each on an exit in a /24 of its own too.
      const spareLines = out.split('\n').filter((l) => /^ {4}spare +\d+ {2}127\./.test(l));
      expect(spareLines, out).to.have.length.at.least(1);
      const everyIp = [...exitLines, ...spareLines].map((l) => l.trim().split(/\s+/)[2] ?? '');
      expect(new Set(everyIp.map((ip) => ip.split('.').slice(0, 3).join('.'))).size, [...exitLines, ...spareLines].join('\n')).to.equal(everyIp.length);
      const started = out;
      // After the banner, the instances' progress is at debug: what is left is the exits' printout.
      const chatter = started
        .slice(bannerAt)
        .split('\n')
        .filter((l) => / info /.test(l) && /instance=|instance bootstrapped/.test(l));
      expect(chatter, 'instance lines at info after the banner').to.deep.equal([]);
      const warnings = started.split('\n').filter((l) => / warn /.test(l) && !/generated (proxy token|dashboard credentials)/.test(l));
      expect(warnings, 'warnings at start').to.deep.equal([]);

      process.kill(-(child.pid as number), 'SIGINT');
      expect(await exited).to.equal(0);
      const stopping = out.slice(started.length);
      expect(stopping).to.include('stopped');
      const complaints = stopping.split('\n').filter((l) => /exited unexpectedly|state file|Couldn't|\[warn\]| warn | error /.test(l));
      expect(complaints, 'warnings while stopping').to.deep.equal([]);
    } finally {
      if (child.exitCode === null) process.kill(-(child.pid as number), 'SIGKILL');
    }
  });
});
