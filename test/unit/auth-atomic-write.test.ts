import { expect } from 'chai';
import * as fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { realFileSystem, writeFileAtomic, type AtomicWriteFileSystem } from '../../supervisor/auth/atomic-write.js';

function failing(step: 'write' | 'sync' | 'rename'): AtomicWriteFileSystem {
  const error = (): Error => Object.assign(new Error(`EIO: injected failure at ${step}`), { code: 'EIO' });
  return {
    ...realFileSystem,
    rename: async (from, to) => {
      if (step === 'rename') throw error();
      return realFileSystem.rename(from, to);
    },
    open: async (file, flags, mode) => {
      const handle = await realFileSystem.open(file, flags, mode);
      if (flags !== 'wx') return handle;
      return {
        writeFile: async (data, encoding) => {
          if (step === 'write') {
            await handle.writeFile(data.slice(0, 3), encoding);
            throw error();
          }
          return handle.writeFile(data, encoding);
        },
        sync: async () => {
          if (step === 'sync') throw error();
          return handle.sync();
        },
        close: () => handle.close(),
      };
    },
  };
}

describe('atomic file write', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'exitpool-atomic-'));
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  it('replaces the file with the given mode and leaves nothing else behind', async () => {
    const file = path.join(dir, 'auth.json');
    await fsp.writeFile(file, 'old');
    await writeFileAtomic(file, 'new content', { mode: 0o600 });
    expect(await fsp.readFile(file, 'utf8')).to.equal('new content');
    expect((await fsp.stat(file)).mode & 0o777).to.equal(0o600);
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json']);
  });

  for (const step of ['write', 'sync', 'rename'] as const) {
    it(`keeps the old file intact and removes the temporary one when ${step} fails`, async () => {
      const file = path.join(dir, 'auth.json');
      await fsp.writeFile(file, 'old content');
      let caught: unknown = null;
      try {
        await writeFileAtomic(file, 'new content that never lands', { mode: 0o600, fileSystem: failing(step) });
      } catch (e) {
        caught = e;
      }
      expect(caught).to.be.instanceOf(Error).with.property('code', 'EIO');
      expect(await fsp.readFile(file, 'utf8')).to.equal('old content');
      expect(await fsp.readdir(dir)).to.deep.equal(['auth.json']);
    });
  }

  it('fails cleanly when the directory is gone', async () => {
    const gone = path.join(dir, 'missing', 'auth.json');
    let caught: unknown = null;
    try {
      await writeFileAtomic(gone, 'x', { mode: 0o600 });
    } catch (e) {
      caught = e;
    }
    expect(caught).to.have.property('code', 'ENOENT');
    expect(await fsp.readdir(dir)).to.deep.equal([]);
  });
});
