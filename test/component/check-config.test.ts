/**
 * `exitpool check-config`'s checks (supervisor/check-config.ts) against real files,
 * ports, binaries and a real redis-server: each finds what a start would refuse, and changes
 * nothing it looks at.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../shared/config/index.js';
import { checkEnvironment, type CheckOutcome } from '../../supervisor/check-config.js';
import { setImmutable } from '../support/fixtures/tmpfs.js';
import { freePort } from '../support/network/free-ports.js';
import { startRedis } from '../support/processes/redis-server.js';

const dirs: string[] = [];

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-check-'));
  dirs.push(dir);
  return dir;
}

async function configWith(env: Record<string, string>): Promise<Config> {
  const [socks, http, api] = [await freePort(), await freePort(), await freePort()];
  return loadConfig({ SOCKS_PORT: String(socks), HTTP_PORT: String(http), API_PORT: String(api), DATA_DIR: tempDir(), ...env });
}

function outcome(outcomes: CheckOutcome[], subject: RegExp): CheckOutcome {
  const found = outcomes.find((o) => subject.test(o.subject));
  expect(found, `a check of ${subject} among ${outcomes.map((o) => o.subject).join(', ')}`).to.not.equal(undefined);
  return found as CheckOutcome;
}

describe('check-config: what a start would refuse, found without starting', function () {
  this.timeout(30_000);

  after(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a usable environment passes every check, and names the Node, tor and the state store', async () => {
    const config = await configWith({});
    const outcomes = await checkEnvironment(config);
    expect(outcomes.filter((o) => !o.ok)).to.deep.equal([]);
    expect(outcome(outcomes, /^Node\.js$/).detail).to.include(process.versions.node);
    expect(outcome(outcomes, /^TOR_BINARY=/).detail).to.match(/^Tor version /);
    expect(outcome(outcomes, /^STATE_STORE=sqlite$/).detail).to.include('node:sqlite is available');
    expect(outcome(outcomes, /^auth\.json$/).detail).to.include('first start generates');
    // Nothing was created: DATA_DIR stays as it was (empty).
    expect(fs.readdirSync(config.dataDir)).to.deep.equal([]);
  });

  it('a DATA_DIR that cannot be written, or is a file, fails; one yet to be created passes when its parent is writable', async () => {
    const dir = tempDir();
    setImmutable(dir, true);
    try {
      const outcomes = await checkEnvironment(await configWith({ DATA_DIR: dir }));
      expect(outcome(outcomes, /^DATA_DIR=/)).to.include({ ok: false });
      expect(outcome(outcomes, /^DATA_DIR=/).detail).to.match(/^cannot be written/);
    } finally {
      setImmutable(dir, false);
    }
    const file = path.join(tempDir(), 'a-file');
    fs.writeFileSync(file, '');
    expect(outcome(await checkEnvironment(await configWith({ DATA_DIR: file })), /^DATA_DIR=/)).to.deep.include({ ok: false, detail: 'is not a directory' });
    const later = path.join(tempDir(), 'not', 'yet');
    const pending = outcome(await checkEnvironment(await configWith({ DATA_DIR: later })), /^DATA_DIR=/);
    expect(pending.ok).to.equal(true);
    expect(pending.detail).to.include('the first start creates it');
    expect(fs.existsSync(later), 'the check does not create it').to.equal(false);
  });

  it('an auth.json or signing.key the start would refuse fails, and is left exactly as found', async () => {
    const config = await configWith({});
    const auth = path.join(config.dataDir, 'auth.json');
    fs.writeFileSync(auth, '{"version": 7}', { mode: 0o644 });
    fs.writeFileSync(path.join(config.dataDir, 'signing.key'), 'not base64!\n', { mode: 0o644 });
    const outcomes = await checkEnvironment(config);
    expect(outcome(outcomes, /^auth\.json$/).ok).to.equal(false);
    expect(outcome(outcomes, /^auth\.json$/).detail).to.include('version 7');
    expect(outcome(outcomes, /^signing\.key$/).ok).to.equal(false);
    expect(fs.readFileSync(auth, 'utf8')).to.equal('{"version": 7}');
    expect(fs.statSync(auth).mode & 0o777, 'not even its mode is changed').to.equal(0o644);
  });

  it('a TOR_BINARY that is missing or not executable fails, naming it', async () => {
    const missing = outcome(await checkEnvironment(await configWith({ TOR_BINARY: '/nonexistent/tor' })), /^TOR_BINARY=/);
    expect(missing).to.include({ ok: false });
    expect(missing.detail).to.include('was not found');
    const notExecutable = path.join(tempDir(), 'tor');
    fs.writeFileSync(notExecutable, '#!/bin/sh\n', { mode: 0o644 });
    expect(outcome(await checkEnvironment(await configWith({ TOR_BINARY: notExecutable })), /^TOR_BINARY=/).detail).to.include('is not executable');
  });

  it('a port in use fails, naming the setting; a BIND_HOST not of this machine fails; the ports are free again after', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const outcomes = await checkEnvironment(await configWith({ API_PORT: String(port) }));
      expect(outcome(outcomes, /^API_PORT=/)).to.deep.include({ ok: false, subject: `API_PORT=${port}` });
      expect(outcome(outcomes, /^API_PORT=/).detail).to.include('already in use');
      expect(outcomes.filter((o) => !o.ok)).to.have.length(1);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
    const config = await configWith({ BIND_HOST: '192.0.2.1' });
    expect(outcome(await checkEnvironment(config), /^SOCKS_PORT=/).detail).to.include('not an address of this machine');
    const again = await configWith({});
    await checkEnvironment(again);
    const reuse = net.createServer();
    await new Promise<void>((resolve, reject) => {
      reuse.once('error', reject);
      reuse.listen(again.apiPort, again.bindHost, () => resolve());
    });
    await new Promise<void>((resolve) => reuse.close(() => resolve()));
  });

  it('STATE_STORE=redis://…: passes when Redis answers, fails naming the cause when it does not, and never shows the password', async () => {
    const redis = await startRedis();
    try {
      const hop = await freePort();
      const outcomes = await checkEnvironment(await configWith({ STATE_STORE: `${redis.url}/pool`, HOP_PORT: String(hop) }));
      expect(outcome(outcomes, /^STATE_STORE=/)).to.include({ ok: true, detail: 'Redis answers' });
      // A node of a fleet opens its hop listener too: its port is checked like the others.
      expect(outcome(outcomes, /^HOP_PORT=/)).to.include({ ok: true, subject: `HOP_PORT=${hop}` });
      expect((await checkEnvironment(await configWith({}))).some((o) => o.subject.startsWith('HOP_PORT=')), 'not off a fleet').to.equal(false);
    } finally {
      await redis.stop();
    }
    const closed = await freePort();
    const down = outcome(await checkEnvironment(await configWith({ STATE_STORE: `redis://:hunter2-long-enough-pw@127.0.0.1:${closed}/pool` })), /^STATE_STORE=/);
    expect(down.ok).to.equal(false);
    expect(down.detail).to.include('ECONNREFUSED');
    expect(JSON.stringify(down)).to.not.include('hunter2-long-enough-pw');
  });
});
