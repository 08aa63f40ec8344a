import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AuthStoreCorruptError } from '../../supervisor/auth/errors.js';
import { readSmallRegularFile } from '../../supervisor/auth/small-regular-file.js';

/** The auth store's one reader of its files (auth.json, signing.key), on hostile paths. */
describe('readSmallRegularFile', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-small-file-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const refusal = async (file: string, maxBytes = 64): Promise<AuthStoreCorruptError> => {
    try {
      await readSmallRegularFile(file, maxBytes, () => 'read');
    } catch (e) {
      if (e instanceof AuthStoreCorruptError) return e;
      throw e;
    }
    throw new Error(`${file} was read`);
  };

  it('answers null for a file that does not exist, and hands the bytes and mode of one that does', async () => {
    expect(await readSmallRegularFile(path.join(dir, 'missing'), 64, () => 'read')).to.equal(null);
    const file = path.join(dir, 'ok');
    fs.writeFileSync(file, 'hello', { mode: 0o640 });
    fs.chmodSync(file, 0o640);
    const got = await readSmallRegularFile(file, 64, ({ bytes, mode }) => ({ text: bytes.toString(), mode }));
    expect(got).to.deep.equal({ text: 'hello', mode: 0o640 });
  });

  it('tightens the mode of the file it read', async () => {
    const file = path.join(dir, 'open');
    fs.writeFileSync(file, 'x');
    fs.chmodSync(file, 0o644);
    await readSmallRegularFile(file, 64, ({ chmod }) => chmod(0o600));
    expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
  });

  it('refuses a directory, a FIFO (without hanging) and a file over the limit, naming the file', async () => {
    expect((await refusal(dir)).reason).to.include('not a regular file');
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    expect((await refusal(fifo)).reason).to.include('not a regular file');
    const big = path.join(dir, 'big');
    fs.writeFileSync(big, 'x'.repeat(65));
    const tooBig = await refusal(big);
    expect(tooBig.reason).to.include('larger than 64 bytes');
    expect(tooBig.message).to.include(big);
  });

  it('passes on what the reader throws', async () => {
    const file = path.join(dir, 'bad');
    fs.writeFileSync(file, 'not ours');
    let error: unknown;
    await readSmallRegularFile(file, 64, () => {
      throw new AuthStoreCorruptError(file, 'is not ours');
    }).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(AuthStoreCorruptError);
  });
});
