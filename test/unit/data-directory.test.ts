import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { judgeDataDirectory, prepareDataDirectory, type DirectoryVerdict } from '../../supervisor/data-directory.js';
import { StartupError } from '../../supervisor/startup/startup-error.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

const SERVICE = { uid: 999, groups: [999, 50] };

describe('DATA_DIR: made private at start', () => {
  describe('judgeDataDirectory (who may do what)', () => {
    const cases: [string, { mode: number; uid: number; gid: number }, typeof SERVICE, DirectoryVerdict['kind']][] = [
      ['ours, 0700', { mode: 0o40700, uid: 999, gid: 999 }, SERVICE, 'private'],
      ['ours, 0755 (an operator’s mkdir under umask 022)', { mode: 0o40755, uid: 999, gid: 999 }, SERVICE, 'tighten'],
      ['ours, 2770 with our group (a volume kubelet gave our fsGroup, in a subdirectory we made)', { mode: 0o42770, uid: 999, gid: 999 }, SERVICE, 'tighten'],
      ['root’s, 0755, we are root', { mode: 0o40755, uid: 1000, gid: 1000 }, { uid: 0, groups: [0] }, 'tighten'],
      ['root’s, 2770, group ours (Kubernetes fsGroup on the volume root)', { mode: 0o42770, uid: 0, gid: 999 }, SERVICE, 'group-shared'],
      ['root’s, 2775, group ours: others may list it', { mode: 0o42775, uid: 0, gid: 999 }, SERVICE, 'refuse'],
      ['root’s, 0770, group ours, no setgid: not shared on purpose', { mode: 0o40770, uid: 0, gid: 999 }, SERVICE, 'refuse'],
      ['root’s, 2770, another group', { mode: 0o42770, uid: 0, gid: 1234 }, SERVICE, 'refuse'],
      ['root’s, 2750, group ours but not writable', { mode: 0o42750, uid: 0, gid: 999 }, SERVICE, 'refuse'],
      ['root’s, 0755 (a bind mount)', { mode: 0o40755, uid: 0, gid: 0 }, SERVICE, 'refuse'],
      ['another user’s, 0700', { mode: 0o40700, uid: 1000, gid: 1000 }, SERVICE, 'refuse'],
    ];
    for (const [name, found, who, kind] of cases) {
      it(`${name}: ${kind}`, () => {
        expect(judgeDataDirectory(found, who).kind).to.equal(kind);
      });
    }
    it('a refusal says what was found and what to do', () => {
      const v = judgeDataDirectory({ mode: 0o40755, uid: 0, gid: 0 }, SERVICE);
      expect(v.kind === 'refuse' && v.reason).to.match(/mode 0755.*uid 0.*uid 999.*chown/);
    });
  });

  describe('prepareDataDirectory (a real directory, as the user the tests run as)', () => {
    const roots: string[] = [];
    const root = (): string => {
      const d = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-datadir-'));
      roots.push(d);
      return d;
    };
    after(() => {
      for (const d of roots) fs.rmSync(d, { recursive: true, force: true });
    });
    const me = { uid: process.getuid?.() ?? 0, groups: process.getgroups?.() ?? [] };
    const modeOf = (p: string): number => fs.statSync(p).mode & 0o7777;

    it('creates a missing DATA_DIR (and its parents) 0700 under a 022 umask', async () => {
      const dir = path.join(root(), 'a', 'b');
      const old = process.umask(0o022);
      try {
        await prepareDataDirectory(dir, quietLogger(), me);
      } finally {
        process.umask(old);
      }
      expect(modeOf(dir).toString(8)).to.equal('700');
      expect(modeOf(path.dirname(dir)).toString(8)).to.equal('700');
    });

    it('tightens a pre-created 0755 DATA_DIR and the files it keeps, leaving everything else alone', async () => {
      const dir = root();
      fs.chmodSync(dir, 0o755);
      const file = (name: string, mode: number): string => {
        const p = path.join(dir, name);
        fs.writeFileSync(p, 'x');
        fs.chmodSync(p, mode);
        return p;
      };
      const kept = ['state.db', 'state.db-wal', 'state.db-shm', 'auth.json', 'signing.key', 'state.db.unusable-2026-01-01T00-00-00-000Z'].map((n) => file(n, 0o644));
      const other = file('notes.txt', 0o644);
      fs.mkdirSync(path.join(dir, 'tor', '0'), { recursive: true });
      fs.chmodSync(path.join(dir, 'tor'), 0o755);
      fs.chmodSync(path.join(dir, 'tor', '0'), 0o755);
      fs.symlinkSync(other, path.join(dir, 'tor', 'link'));
      const prepared = await prepareDataDirectory(dir, quietLogger(), me);
      expect(modeOf(dir).toString(8)).to.equal('700');
      for (const p of kept) expect(modeOf(p).toString(8), p).to.equal('600');
      expect(modeOf(path.join(dir, 'tor')).toString(8)).to.equal('700');
      expect(modeOf(path.join(dir, 'tor', '0')).toString(8)).to.equal('700');
      expect(modeOf(other).toString(8), 'not the service’s file, not followed through a link').to.equal('644');
      expect(prepared.tightened.map((t) => path.relative(dir, t.path)).sort()).to.include.members(['', 'auth.json', 'state.db', 'tor', 'tor/0']);
      expect(prepared.groupShared).to.equal(false);
    });

    it('refuses a DATA_DIR that is a file, naming DATA_DIR', async () => {
      const p = path.join(root(), 'file');
      fs.writeFileSync(p, '');
      let error: unknown;
      await prepareDataDirectory(p, quietLogger(), me).catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(StartupError);
      expect((error as StartupError).setting).to.equal('DATA_DIR');
    });
  });
});
