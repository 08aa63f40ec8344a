/**
 * The fleet's epoch as Redis keeps it (hostile text read back), the lineage of a re-seed, and the
 * node's own memory of it in DATA_DIR/fleet-epoch.json (kept 0600, never guessed at when unreadable).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import * as fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { continuing, decodeEpoch, encodeEpoch, isEpochId, MAX_CONTINUED_EPOCHS, newEpochId } from '../../supervisor/fleet/fleet-epoch.js';
import { EpochFile, EpochFileError, FLEET_EPOCH_FILE_NAME } from '../../supervisor/fleet/fleet-epoch-file.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

describe('fleet epoch', () => {
  it('new ids are epoch ids, and tell when they were made', () => {
    const id = newEpochId(Date.UTC(2026, 10, 24, 10, 15, 0));
    expect(isEpochId(id)).to.equal(true);
    expect(id).to.match(/^20261124T101500Z-[A-Za-z0-9_-]{12}$/);
    expect(newEpochId()).to.not.equal(newEpochId());
  });

  it('round-trips an epoch, and reads anything else as no epoch (property)', () => {
    const epoch = { id: 'e1', continues: ['e0', 'e-1'] };
    expect(decodeEpoch(encodeEpoch(epoch))).to.deep.equal(epoch);
    for (const bad of ['', ' ', 'a  b', 'e1 bad/id', 'x'.repeat(65), Array.from({ length: MAX_CONTINUED_EPOCHS + 2 }, (_, i) => `e${i}`).join(' ')]) expect(decodeEpoch(bad), JSON.stringify(bad)).to.equal(null);
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => {
        const read = decodeEpoch(text);
        if (read !== null) expect(encodeEpoch(read)).to.equal(text);
      }),
      { numRuns: fuzzRuns(1000) },
    );
  });

  it('a re-seed continues the lost epoch and all it continued, and the other fleet it replaces, within the bound', () => {
    const lost = { id: 'lost', continues: ['older'] };
    const next = continuing(lost, { id: 'other', continues: ['lost'] });
    expect(next.continues).to.deep.equal(['lost', 'older', 'other']);
    const long = continuing({ id: 'x', continues: Array.from({ length: 40 }, (_, i) => `c${i}`) }, null);
    expect(long.continues).to.have.length(MAX_CONTINUED_EPOCHS);
    expect(decodeEpoch(encodeEpoch(long))).to.deep.equal(long);
  });

  describe('DATA_DIR/fleet-epoch.json', () => {
    let dir = '';
    beforeEach(async () => {
      dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'exitpool-epoch-'));
    });
    afterEach(async () => {
      await fsp.rm(dir, { recursive: true, force: true });
    });

    it('remembers one epoch per pool, 0600, and nothing for a pool it never joined', async () => {
      const file = new EpochFile(dir);
      expect(await file.load('exitpool:a:')).to.equal(null);
      await file.save('exitpool:a:', { id: 'ea', continues: [] });
      await file.save('exitpool:b:', { id: 'eb', continues: ['ea'] });
      const again = new EpochFile(dir);
      expect(await again.load('exitpool:a:')).to.deep.equal({ id: 'ea', continues: [] });
      expect(await again.load('exitpool:b:')).to.deep.equal({ id: 'eb', continues: ['ea'] });
      expect((await fsp.stat(path.join(dir, FLEET_EPOCH_FILE_NAME))).mode & 0o777).to.equal(0o600);
    });

    it('refuses a file it did not write, and leaves it as it was', async () => {
      const where = path.join(dir, FLEET_EPOCH_FILE_NAME);
      for (const text of ['not json', '[]', '{"version":2,"pools":{}}', '{"version":1,"pools":[]}', '{"version":1,"pools":{"exitpool:a:":7}}', '{"version":1,"pools":{"exitpool:a:":"bad/epoch"}}']) {
        await fsp.writeFile(where, text, { mode: 0o600 });
        const error = await new EpochFile(dir).load('exitpool:a:').then(() => null, (e: unknown) => e);
        expect(error, text).to.be.instanceOf(EpochFileError);
        expect(await fsp.readFile(where, 'utf8')).to.equal(text);
      }
      await fsp.rm(where);
      await fsp.mkdir(where);
      expect(await new EpochFile(dir).load('exitpool:a:').then(() => null, (e: unknown) => e)).to.be.instanceOf(EpochFileError);
    });
  });
});
