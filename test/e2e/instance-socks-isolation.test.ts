/**
 * Issue 14, finding 8f on the private network: the instances' own SocksPorts are not open to
 * everyone on the host. On 0.1.0 each tor listened on 127.0.0.1:<INSTANCE_PORT_BASE + 2N>, and
 * `curl --socks5-hostname 127.0.0.1:<port>` went out through the pool's exits with no token,
 * past authentication, accounting and revocation.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { InstanceView } from '../../shared/api/views.js';
import { curl, curlSocks } from '../support/clients/curl.js';
import { tcpListenersOf } from '../support/processes/listeners.js';
import { TEST_PROXY_TOKEN, withService, type RunningService } from '../support/fixtures/service.js';

/** An unprivileged user for the "another user on the host" check. */
const NOBODY = 65534;

function curlAs(uid: number, args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('curl', args, { uid, gid: uid, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (e) => resolve({ code: -1, stderr: e.message }));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

describe("instance SocksPorts: closed to other users", function () {
  this.timeout(240_000);
  let admin: string;
  let instances: InstanceView[];

  const suite = withService({ POOL_SIZE: '2' }, { ready: 2, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
    instances = (await (await suite.svc.api('/api/instances', { bearer: admin })).json()) as InstanceView[];
  });

  it('listens on a Unix socket in a 0700 directory owned by the service, named in socks_addr, and on no TCP port', async () => {
    for (const i of instances) {
      expect(i.socks_addr, `instance ${i.id}`).to.match(/^unix:\//);
      const socket = i.socks_addr.slice('unix:'.length);
      expect(socket).to.equal(path.join(suite.svc.dataDir, 'tor', String(i.id), 'socks.sock'));
      expect(fs.statSync(socket).isSocket()).to.equal(true);
      const dir = fs.statSync(path.dirname(socket));
      expect(dir.mode & 0o777, `${path.dirname(socket)} mode`).to.equal(0o700);
      expect(dir.uid).to.equal(process.getuid?.());
      // tor holds no listening TCP socket at all (the control port is a Unix socket too).
      expect(tcpListenersOf(i.pid), `TCP listeners of tor ${i.pid}`).to.deep.equal([]);
    }
  });

  it('is usable by the service itself: proxying through the pool works, and root reaches the socket', async () => {
    const r = await curlSocks(suite.svc.socksPort, 'through-the-pool', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    // The same curl as the service's own user reaches tor through the socket: what stops "nobody" below is the permission.
    const socket = instances[0]!.socks_addr.slice('unix:'.length);
    const own = await curl(['-sS', '--max-time', '20', '--proxy', `socks5h://localhost${socket}`, suite.svc.whoamiUrl], 30_000);
    expect(own.code, own.stderr).to.equal(0);
  });

  it('refuses everyone else: the old TCP ports are closed, and another user cannot open the socket', async () => {
    for (const i of instances) {
      const socket = i.socks_addr.slice('unix:'.length);
      const other = await curlAs(NOBODY, ['-sS', '--max-time', '10', '--proxy', `socks5h://localhost${socket}`, suite.svc.whoamiUrl]);
      // curl ran (as nobody) and could not connect: the directory is not theirs to enter.
      expect(other.code, `another user through ${socket}: ${other.stderr}`).to.equal(7);
      expect(other.stderr).to.match(/Couldn't connect|Permission denied/);
    }
    const viaPort = await Promise.all(instances.map((i) => curl(['--max-time', '10', '--socks5-hostname', `127.0.0.1:${instancePortOf(suite.svc, i.id)}`, suite.svc.whoamiUrl], 15_000)));
    for (const r of viaPort) expect(r.code, 'no SOCKS listener on the old instance port').to.not.equal(0);
  });
});

/** The TCP port 0.1.0 gave instance `id` (INSTANCE_PORT_BASE + 2·id). */
function instancePortOf(svc: RunningService, id: number): number {
  return svc.instancePortBase + 2 * id;
}
