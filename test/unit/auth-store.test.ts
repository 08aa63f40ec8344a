import { expect } from 'chai';
import fc from 'fast-check';
import * as fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { LoginChecker } from '../../workers/api/auth/login-checker.js';
import { SignInCredentials } from '../../workers/api/auth/sign-in-credentials.js';
import { digestTokenSecret, ISSUED_TOKEN_SECRET_PATTERN } from '../../shared/auth/token-format.js';
import { TokenVerifier } from '../../shared/auth/token-verifier.js';
import { AuthBadRequestError } from '../../shared/auth/errors.js';
import { realFileSystem, type AtomicWriteFileSystem } from '../../supervisor/auth/atomic-write.js';
import { AuthStore, type AuthStoreConfig, type AuthStoreOptions } from '../../supervisor/auth/auth-store.js';
import {
  AuthStoreCorruptError,
  AuthStorePersistError,
  ConfigTokenNotRevocableError,
  TokenNotFoundError,
} from '../../supervisor/auth/errors.js';
import { deriveSigningKey } from '../../supervisor/auth/signing-key.js';
import { AdminPasswordResetRefused, resetAdminPassword } from '../../supervisor/auth/reset-admin-password.js';
import { parseSigningSecretFile } from '../../supervisor/auth/signing-secret-file.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { capturingLogger } from '../support/fakes/proxy-parts.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { setImmutable } from '../support/fixtures/tmpfs.js';

const TEST_BCRYPT_COST = 4;
const dirs: string[] = [];

async function tempDir(): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'exitpool-auth-'));
  dirs.push(dir);
  return dir;
}

function configFor(dataDir: string, overrides: Partial<AuthStoreConfig> = {}): AuthStoreConfig {
  return { adminUser: 'admin', adminPassword: null, proxyToken: null, authDisabled: false, dataDir, ...overrides };
}

/** A store as a start that succeeded leaves it: opened, and what it generated committed. */
async function open(config: AuthStoreConfig, extra: Partial<AuthStoreOptions> = {}): ReturnType<typeof AuthStore.open> {
  const opened = await openUncommitted(config, extra);
  await opened.store.commitGenerated();
  return opened;
}

/** A store as a start leaves it before it has succeeded. */
function openUncommitted(config: AuthStoreConfig, extra: Partial<AuthStoreOptions> = {}): ReturnType<typeof AuthStore.open> {
  return AuthStore.open({ config, log: quietLogger(), bcryptCost: TEST_BCRYPT_COST, ...extra });
}

async function expectRejection<E extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => E): Promise<E> {
  try {
    await promise;
  } catch (e) {
    expect(e).to.be.instanceOf(type);
    return e as E;
  }
  expect.fail(`expected a ${type.name}`);
}

function modeOf(stat: { mode: number }): number {
  return stat.mode & 0o777;
}

/** A file system whose writes fail with ENOSPC (after writing part of the data) while `failing` is true. */
function diskFullWhen(failing: () => boolean): AtomicWriteFileSystem {
  return {
    ...realFileSystem,
    open: async (file, flags, mode) => {
      const handle = await realFileSystem.open(file, flags, mode);
      if (flags !== 'wx' || !failing()) return handle;
      return {
        writeFile: async (data, encoding) => {
          await handle.writeFile(data.slice(0, Math.floor(data.length / 2)), encoding);
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        },
        sync: () => handle.sync(),
        close: () => handle.close(),
      };
    },
  };
}

describe('auth store', () => {
  after(async () => {
    await Promise.all(dirs.map((d) => fsp.rm(d, { recursive: true, force: true })));
  });

  it('on first boot generates a password and a proxy token, returns the cleartext once, stores digests only (0600)', async () => {
    const dir = await tempDir();
    const { store, generated } = await open(configFor(dir));
    expect(generated.adminPassword).to.match(/^[A-Za-z0-9]{20}$/);
    const token = generated.proxyToken!;
    expect(token.secret).to.match(ISSUED_TOKEN_SECRET_PATTERN);
    expect(token).to.include({ scope: 'proxy', source: 'store' });
    expect(token.id).to.match(/^[A-Za-z0-9]{10}$/);

    const file = path.join(dir, 'auth.json');
    expect(modeOf(await fsp.stat(file))).to.equal(0o600);
    const text = await fsp.readFile(file, 'utf8');
    expect(text).not.to.include(generated.adminPassword!);
    expect(text).not.to.include(token.secret);
    expect(text).not.to.include(token.secret.slice(3));
    expect(text).to.include(digestTokenSecret(token.secret));
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);

    const { proxy, api } = store.snapshots();
    expect(TokenVerifier.fromSnapshot(proxy).verify(token.secret)).to.deep.equal({ id: token.id, scope: 'proxy' });
    expect(await new LoginChecker(api).check('admin', generated.adminPassword!)).to.equal(true);
    expect(store.listTokens()).to.deep.equal([{ id: token.id, name: token.name, scope: 'proxy', source: 'store', created_at: token.created_at, owner: '' }]);
    expect(JSON.stringify(store.listTokens())).not.to.include(token.secret);
  });

  it('keeps the credentials across a restart and generates nothing more', async () => {
    const dir = await tempDir();
    const first = await open(configFor(dir));
    const before = await fsp.readFile(path.join(dir, 'auth.json'));
    const second = await open(configFor(dir));
    expect(second.generated).to.deep.equal({ adminPassword: null, proxyToken: null });
    expect(await fsp.readFile(path.join(dir, 'auth.json'))).to.deep.equal(before);
    expect(second.store.listTokens()).to.deep.equal(first.store.listTokens());
    const { proxy, api } = second.store.snapshots();
    expect(TokenVerifier.fromSnapshot(proxy).verify(first.generated.proxyToken!.secret)).not.to.equal(null);
    expect(await new LoginChecker(api).check('admin', first.generated.adminPassword!)).to.equal(true);
    // The signing key is stable, so sign-ins survive a plain restart.
    expect(api.signingKey).to.equal(first.store.snapshots().api.signingKey);
  });

  it('snapshots: proxy workers get no password hash or key; frozen; the version grows with each change', async () => {
    const { store } = await open(configFor(await tempDir()));
    const { proxy, api } = store.snapshots();
    expect(Object.keys(proxy).sort()).to.deep.equal(['authDisabled', 'tokens', 'version']);
    expect(Object.keys(api).sort()).to.deep.equal(['adminUser', 'authDisabled', 'passwordHash', 'signingKey', 'tokens', 'version']);
    expect(Object.isFrozen(proxy) && Object.isFrozen(api) && Object.isFrozen(proxy.tokens) && Object.isFrozen(proxy.tokens[0])).to.equal(true);
    expect(JSON.parse(JSON.stringify(api))).to.deep.equal(api);
    expect(store.snapshots()).to.equal(store.snapshots());
    const created = await store.createToken({ name: 'ci', scope: 'admin' });
    expect(created.snapshots.proxy.version).to.equal(proxy.version + 1);
    const revoked = store.revokeToken(created.token.id);
    expect(revoked.snapshots.proxy.version).to.equal(proxy.version + 2);
    await revoked.persisted;
  });

  describe('credentials generated by a start are kept only once that start has succeeded', () => {
    it('a start that fails before its commit leaves no credentials behind; the next start generates and shows its own', async () => {
      const dir = await tempDir();
      const failed = await openUncommitted(configFor(dir));
      expect(failed.generated.adminPassword).to.not.equal(null);
      expect(await fsp.readdir(dir)).to.not.include('auth.json');

      const { logger, lines } = capturingLogger();
      const next = await openUncommitted(configFor(dir), { log: logger });
      expect(next.generated.adminPassword).to.match(/^[A-Za-z0-9]{20}$/).and.not.equal(failed.generated.adminPassword);
      expect(next.generated.proxyToken?.secret).to.not.equal(failed.generated.proxyToken?.secret);
      expect(lines.filter((l) => String(l.message).startsWith('generated')), 'nothing shown before the commit').to.deep.equal([]);
      await next.store.commitGenerated();
      const shown = lines.filter((l) => String(l.message).startsWith('generated'));
      expect(shown.map((l) => [l.message, l.password ?? l.token])).to.deep.equal([
        ['generated dashboard credentials (shown once; stored as a digest)', next.generated.adminPassword],
        ['generated proxy token (shown once; stored as a digest)', next.generated.proxyToken!.secret],
      ]);
      // Shown once: a second commit says nothing.
      await next.store.commitGenerated();
      expect(lines.filter((l) => String(l.message).startsWith('generated'))).to.have.length(2);

      const after = await open(configFor(dir));
      expect(after.generated).to.deep.equal({ adminPassword: null, proxyToken: null });
      expect(await new LoginChecker(after.store.snapshots().api).check('admin', next.generated.adminPassword!)).to.equal(true);
      expect(TokenVerifier.fromSnapshot(after.store.snapshots().proxy).verify(failed.generated.proxyToken!.secret)).to.equal(null);
    });

    it('a password generated because ADMIN_PASSWORD was removed is not kept by a start that fails', async () => {
      const dir = await tempDir();
      await open(configFor(dir, { adminPassword: 'from-env' }));
      const failed = await openUncommitted(configFor(dir));
      expect(failed.generated.adminPassword).to.not.equal(null);
      expect(JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')).admin.passwordHash).to.equal(null);
      const next = await open(configFor(dir));
      expect(next.generated.adminPassword).to.not.equal(null).and.not.equal(failed.generated.adminPassword);
    });

    it('a token issued before the commit saves the generated credentials with it; the commit then only shows them', async () => {
      const dir = await tempDir();
      const { logger, lines } = capturingLogger();
      const { store, generated } = await openUncommitted(configFor(dir), { log: logger });
      await store.createToken({ name: 'early', scope: 'admin' });
      const saved = await fsp.readFile(path.join(dir, 'auth.json'), 'utf8');
      expect(saved).to.include(digestTokenSecret(generated.proxyToken!.secret));
      await store.commitGenerated();
      expect(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')).to.equal(saved);
      expect(lines.filter((l) => String(l.message).startsWith('generated'))).to.have.length(2);
    });

    it('a DATA_DIR that cannot be written refuses the start at open, before anything runs', async () => {
      const dir = await tempDir();
      // Immutable (chattr +i): refuses even root, as a read-only mount would. With SIGNING_SECRET
      // set, signing.key is not written, so the refusal is the credential store's own.
      setImmutable(dir, true);
      try {
        await expectRejection(openUncommitted(configFor(dir, { signingSecret: 'a secret from the environment' })), AuthStorePersistError);
      } finally {
        setImmutable(dir, false);
      }
    });

    it('a commit whose write fails keeps the credentials working until the process stops, and says so', async () => {
      const dir = await tempDir();
      let failing = false;
      const { logger, lines } = capturingLogger();
      const { store, generated } = await openUncommitted(configFor(dir), { log: logger, fileSystem: diskFullWhen(() => failing) });
      failing = true;
      await store.commitGenerated();
      expect(lines.map((l) => l.message)).to.include('generated proxy token (not stored: valid until this process stops)');
      expect(lines.some((l) => l.level === 'error')).to.equal(true);
      expect(TokenVerifier.fromSnapshot(store.snapshots().proxy).verify(generated.proxyToken!.secret)).to.not.equal(null);
      expect(await fsp.readdir(dir)).to.not.include('auth.json');
    });
  });

  describe('exitpool reset-admin-password', () => {
    it('replaces a lost password with a new one, keeps every token, and takes effect at the next start', async () => {
      const dir = await tempDir();
      const first = await open(configFor(dir));
      const issued = await first.store.createToken({ name: 'kept', scope: 'admin' });
      const { password, file } = await resetAdminPassword({ dataDir: dir, adminPasswordSet: false, log: quietLogger(), bcryptCost: TEST_BCRYPT_COST });
      expect(password).to.match(/^[A-Za-z0-9]{20}$/).and.not.equal(first.generated.adminPassword);
      expect(file).to.equal(path.join(dir, 'auth.json'));
      expect(modeOf(await fsp.stat(file))).to.equal(0o600);
      expect(await fsp.readFile(file, 'utf8')).to.not.include(password);

      const next = await open(configFor(dir));
      expect(next.generated).to.deep.equal({ adminPassword: null, proxyToken: null });
      const checker = new LoginChecker(next.store.snapshots().api);
      expect(await checker.check('admin', password)).to.equal(true);
      expect(await checker.check('admin', first.generated.adminPassword!)).to.equal(false);
      const verifier = TokenVerifier.fromSnapshot(next.store.snapshots().proxy);
      expect(verifier.verify(first.generated.proxyToken!.secret)).to.not.equal(null);
      expect(verifier.verify(issued.token.secret)).to.not.equal(null);
    });

    it('beside a running service: its later saves keep the new digest, and it goes on with its own password until it restarts', async () => {
      const dir = await tempDir();
      const running = await open(configFor(dir));
      const { password } = await resetAdminPassword({ dataDir: dir, adminPasswordSet: false, log: quietLogger(), bcryptCost: TEST_BCRYPT_COST });
      await running.store.createToken({ name: 'after the reset', scope: 'proxy' });
      const revoked = await running.store.createToken({ name: 'revoked', scope: 'proxy' });
      await running.store.revokeToken(revoked.token.id).persisted;
      expect(await new LoginChecker(running.store.snapshots().api).check('admin', running.generated.adminPassword!)).to.equal(true);

      const next = await open(configFor(dir));
      expect(await new LoginChecker(next.store.snapshots().api).check('admin', password)).to.equal(true);
      expect(next.store.listTokens().map((t) => t.name)).to.deep.equal(['generated on first boot', 'after the reset']);
    });

    it('is refused while ADMIN_PASSWORD is set, without an auth.json, and for a corrupt one (left untouched)', async () => {
      const dir = await tempDir();
      const refused = await expectRejection(resetAdminPassword({ dataDir: dir, adminPasswordSet: true, log: quietLogger() }), AdminPasswordResetRefused);
      expect(refused.message).to.include('ADMIN_PASSWORD');
      const missing = await expectRejection(resetAdminPassword({ dataDir: dir, adminPasswordSet: false, log: quietLogger() }), AdminPasswordResetRefused);
      expect(missing.message).to.include('first start');
      await fsp.writeFile(path.join(dir, 'auth.json'), '{"version": 2, "admin": {}}', { mode: 0o600 });
      await expectRejection(resetAdminPassword({ dataDir: dir, adminPasswordSet: false, log: quietLogger() }), AuthStoreCorruptError);
      expect(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')).to.equal('{"version": 2, "admin": {}}');
    });
  });

  describe('refuses an unusable auth.json and leaves it byte-identical', () => {
    const validShape = {
      version: 1,
      signingSecret: Buffer.alloc(32, 7).toString('base64'),
      admin: { passwordHash: null },
      tokens: [] as unknown[],
    };
    const cases: [string, string | Buffer][] = [
      ['empty', ''],
      ['not JSON', '{"version": 1,'],
      ['not an object', '[]'],
      ['an empty object', '{}'],
      ['an unknown version', JSON.stringify({ ...validShape, version: 4 })],
      ['a version-3 file without its revoked ids', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [] })],
      ['revoked ids that are not a list', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [], revoked: 'a1' })],
      ['a revoked id that is not a token id', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [], revoked: ['a1', 'no/slash'] })],
      ['one revoked id twice', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [], revoked: ['a1', 'a1'] })],
      ['more revoked ids than are remembered', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [], revoked: Array.from({ length: 10_001 }, (_, i) => `r${i}`) })],
      ['a token listed as revoked too', JSON.stringify({ version: 3, admin: { passwordHash: null }, tokens: [{ id: 'a1', name: 'x', scope: 'proxy', digest: 'a'.repeat(64), createdAt: 1 }], revoked: ['a1'] })],
      ['a version-2 file with a signing secret', JSON.stringify({ ...validShape, version: 2 })],
      ['an unknown field', JSON.stringify({ ...validShape, extra: true })],
      ['a short signing secret', JSON.stringify({ ...validShape, signingSecret: 'AAAA' })],
      ['a bad password hash', JSON.stringify({ ...validShape, admin: { passwordHash: 'plaintext' } })],
      ['a token with a bad digest', JSON.stringify({ ...validShape, tokens: [{ id: 'a1', name: 'x', scope: 'proxy', digest: 'zz', createdAt: 1 }] })],
      ['a token with a bad scope', JSON.stringify({ ...validShape, tokens: [{ id: 'a1', name: 'x', scope: 'root', digest: 'a'.repeat(64), createdAt: 1 }] })],
      [
        'two tokens with one id',
        JSON.stringify({
          ...validShape,
          tokens: [
            { id: 'a1', name: 'x', scope: 'proxy', digest: 'a'.repeat(64), createdAt: 1 },
            { id: 'a1', name: 'y', scope: 'proxy', digest: 'b'.repeat(64), createdAt: 1 },
          ],
        }),
      ],
      ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    ];
    for (const [label, content] of cases) {
      it(label, async () => {
        const dir = await tempDir();
        const file = path.join(dir, 'auth.json');
        await fsp.writeFile(file, content, { mode: 0o644 });
        await fsp.chmod(file, 0o644);
        const before = await fsp.readFile(file);
        const error = await expectRejection(open(configFor(dir)), AuthStoreCorruptError);
        expect(error.file).to.equal(file);
        expect(error.message).to.include(file).and.to.include('refusing to start');
        expect(await fsp.readFile(file)).to.deep.equal(before);
        expect(modeOf(await fsp.stat(file))).to.equal(0o644);
        expect(await fsp.readdir(dir)).to.deep.equal(['auth.json']);
      });
    }

    it('a path that is not a regular file (unreadable as a file)', async () => {
      const dir = await tempDir();
      await fsp.mkdir(path.join(dir, 'auth.json'));
      const error = await expectRejection(open(configFor(dir)), AuthStoreCorruptError);
      expect(error.reason).to.include('not a regular file');
      expect((await fsp.stat(path.join(dir, 'auth.json'))).isDirectory()).to.equal(true);
    });
  });

  it('tightens too-open permissions of a good file to 0600 and keeps its content', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'auth.json');
    await open(configFor(dir));
    await fsp.chmod(file, 0o644);
    const before = await fsp.readFile(file);
    await open(configFor(dir));
    expect(modeOf(await fsp.stat(file))).to.equal(0o600);
    expect(await fsp.readFile(file)).to.deep.equal(before);
  });

  it('creates and revokes tokens; each change reaches disk with no temporary file left', async () => {
    const dir = await tempDir();
    const { store } = await open(configFor(dir));
    const created = await store.createToken({ name: 'scraper fleet', scope: 'admin' });
    expect(created.token.secret).to.match(ISSUED_TOKEN_SECRET_PATTERN);
    expect(created.token).to.include({ name: 'scraper fleet', scope: 'admin', source: 'store' });
    expect(TokenVerifier.fromSnapshot(created.snapshots.proxy).verify(created.token.secret)).to.deep.equal({ id: created.token.id, scope: 'admin' });
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);
    expect((await open(configFor(dir))).store.listTokens().map((t) => t.id)).to.include(created.token.id);

    const revoked = store.revokeToken(created.token.id);
    // In effect before the save finishes: the returned snapshot no longer knows the token.
    expect(TokenVerifier.fromSnapshot(revoked.snapshots.proxy).verify(created.token.secret)).to.equal(null);
    await revoked.persisted;
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);
    expect((await open(configFor(dir))).store.listTokens().map((t) => t.id)).not.to.include(created.token.id);
  });

  it('validates token names and scopes on create', async () => {
    const { store } = await open(configFor(await tempDir()));
    await expectRejection(store.createToken({ name: 'bad\nname', scope: 'proxy' }), AuthBadRequestError);
    await expectRejection(store.createToken({ name: 'x'.repeat(65), scope: 'proxy' }), AuthBadRequestError);
    await expectRejection(store.createToken({ name: 'ok', scope: 'root' as 'proxy' }), AuthBadRequestError);
    expect(store.listTokens()).to.have.length(1);
  });

  it('applies every one of many concurrent creates and revokes', async () => {
    const dir = await tempDir();
    const { store } = await open(configFor(dir));
    const initial = await Promise.all(Array.from({ length: 10 }, (_, i) => store.createToken({ name: `t${i}`, scope: 'proxy' })));
    const revocations = initial.map((c) => store.revokeToken(c.token.id));
    const creations = Array.from({ length: 15 }, (_, i) => store.createToken({ name: `n${i}`, scope: i % 2 ? 'admin' : 'proxy' }));
    const moreRevocations = (await Promise.all(creations.slice(0, 5))).map((c) => store.revokeToken(c.token.id));
    await Promise.all([...revocations, ...moreRevocations].map((r) => r.persisted));
    const created = await Promise.all(creations);
    await store.idle();

    const survivors = created.slice(5).map((c) => c.token.id);
    const expected = [store.listTokens()[0]!.id, ...survivors];
    expect(store.listTokens().map((t) => t.id)).to.deep.equal(expected);
    expect((await open(configFor(dir))).store.listTokens().map((t) => t.id)).to.deep.equal(expected);
    const verifier = TokenVerifier.fromSnapshot(store.snapshots().proxy);
    for (const c of initial) expect(verifier.verify(c.token.secret)).to.equal(null);
    for (const c of created.slice(5)) expect(verifier.verify(c.token.secret)).not.to.equal(null);
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);
  });

  it('a create whose save fails (disk full mid-write) changes nothing and hands out no secret', async () => {
    const dir = await tempDir();
    let failing = false;
    const { store } = await open(configFor(dir), { fileSystem: diskFullWhen(() => failing) });
    const file = path.join(dir, 'auth.json');
    const before = await fsp.readFile(file);
    const snapshotsBefore = store.snapshots();
    failing = true;
    const error = await expectRejection(store.createToken({ name: 'ci', scope: 'admin' }), AuthStorePersistError);
    expect(error.code).to.equal('EXITPOOL_NOT_PERSISTED');
    expect(error.message).to.include(file).and.to.include('ENOSPC');
    expect(await fsp.readFile(file)).to.deep.equal(before);
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);
    expect(store.listTokens()).to.have.length(1);
    expect(store.snapshots()).to.equal(snapshotsBefore);
    failing = false;
    await store.createToken({ name: 'ci', scope: 'admin' });
    expect(store.listTokens()).to.have.length(2);
  });

  it('a revoke whose save fails stays revoked in memory, reports the failure, and the next save repairs the file', async () => {
    const dir = await tempDir();
    let failing = false;
    const { store } = await open(configFor(dir), { fileSystem: diskFullWhen(() => failing) });
    const victim = await store.createToken({ name: 'victim', scope: 'proxy' });
    const file = path.join(dir, 'auth.json');
    const before = await fsp.readFile(file);
    failing = true;
    const revocation = store.revokeToken(victim.token.id);
    expect(TokenVerifier.fromSnapshot(revocation.snapshots.proxy).verify(victim.token.secret)).to.equal(null);
    await expectRejection(revocation.persisted, AuthStorePersistError);
    expect(await fsp.readFile(file)).to.deep.equal(before);
    expect(await fsp.readdir(dir)).to.deep.equal(['auth.json', 'signing.key']);
    expect(TokenVerifier.fromSnapshot(store.snapshots().proxy).verify(victim.token.secret)).to.equal(null);
    expect(() => store.revokeToken(victim.token.id)).to.throw(TokenNotFoundError);

    failing = false;
    await store.createToken({ name: 'later', scope: 'proxy' });
    const reopened = (await open(configFor(dir))).store;
    expect(reopened.listTokens().map((t) => t.id)).not.to.include(victim.token.id);
  });

  it('reports a real file-system failure (data directory gone) as AuthStorePersistError', async () => {
    const dir = await tempDir();
    const { store } = await open(configFor(dir));
    await fsp.rm(dir, { recursive: true });
    await expectRejection(store.createToken({ name: 'x', scope: 'proxy' }), AuthStorePersistError);
    expect(store.listTokens()).to.have.length(1);
  });

  it('PROXY_TOKEN: verified like any token, listed with source config, never persisted, not revocable (409)', async () => {
    const dir = await tempDir();
    const secret = 'tp_legacy-config_token_0123';
    const { store } = await open(configFor(dir, { proxyToken: secret }));
    const listed = store.listTokens();
    const configToken = listed.find((t) => t.source === 'config')!;
    expect(configToken).to.include({ scope: 'proxy', name: 'PROXY_TOKEN' });
    expect(configToken.id).to.match(/^[A-Za-z0-9]{10}$/);
    expect(TokenVerifier.fromSnapshot(store.snapshots().proxy).verify(secret)).to.deep.equal({ id: configToken.id, scope: 'proxy' });

    const text = await fsp.readFile(path.join(dir, 'auth.json'), 'utf8');
    expect(text).not.to.include(secret);
    expect(text).not.to.include(digestTokenSecret(secret));
    expect(text).not.to.include(configToken.id);

    const error = (() => {
      try {
        store.revokeToken(configToken.id);
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(error).to.be.instanceOf(ConfigTokenNotRevocableError);
    expect((error as ConfigTokenNotRevocableError).code).to.equal('EXITPOOL_TOKEN_NOT_REVOCABLE');
    expect(() => store.revokeToken('nosuchtoken')).to.throw(TokenNotFoundError).with.property('code', 'EXITPOOL_NO_SUCH_TOKEN');
    // Stable id across restarts.
    expect((await open(configFor(dir, { proxyToken: secret }))).store.listTokens()[0]!.id).to.equal(configToken.id);
    // Gone when the variable is.
    const without = (await open(configFor(dir))).store;
    expect(without.listTokens().some((t) => t.source === 'config')).to.equal(false);
    expect(TokenVerifier.fromSnapshot(without.snapshots().proxy).verify(secret)).to.equal(null);
  });

  it('ADMIN_PASSWORD wins at once, is never written, clears the stored digest; removing it generates a fresh password', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'auth.json');
    const boot1 = await open(configFor(dir));
    const generatedPassword = boot1.generated.adminPassword!;

    const envPassword = 'correct horse battery staple';
    const boot2 = await open(configFor(dir, { adminPassword: envPassword }));
    expect(boot2.generated.adminPassword).to.equal(null);
    const text = await fsp.readFile(file, 'utf8');
    expect(text).not.to.include(envPassword);
    expect(JSON.parse(text).admin.passwordHash).to.equal(null);
    const checker2 = new LoginChecker(boot2.store.snapshots().api);
    expect(await checker2.check('admin', envPassword)).to.equal(true);
    expect(await checker2.check('admin', generatedPassword)).to.equal(false);

    const boot3 = await open(configFor(dir));
    const fresh = boot3.generated.adminPassword!;
    expect(fresh).to.match(/^[A-Za-z0-9]{20}$/).and.not.to.equal(generatedPassword);
    const checker3 = new LoginChecker(boot3.store.snapshots().api);
    expect(await checker3.check('admin', fresh)).to.equal(true);
    expect(await checker3.check('admin', envPassword)).to.equal(false);
    expect(boot3.generated.proxyToken).to.equal(null);
  });

  it('with ADMIN_PASSWORD on first boot, generates only the token and stores no password digest', async () => {
    const dir = await tempDir();
    const { generated } = await open(configFor(dir, { adminPassword: 'from-env' }));
    expect(generated.adminPassword).to.equal(null);
    expect(generated.proxyToken).not.to.equal(null);
    const stored = JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8'));
    expect(stored.admin.passwordHash).to.equal(null);
  });

  it('AUTH_DISABLED still generates and stores credentials, and snapshots say so', async () => {
    const dir = await tempDir();
    const { store, generated } = await open(configFor(dir, { authDisabled: true }));
    expect(generated.adminPassword).to.be.a('string');
    expect(generated.proxyToken).not.to.equal(null);
    expect(store.snapshots().proxy.authDisabled).to.equal(true);
    const enforced = (await open(configFor(dir))).store.snapshots();
    expect(enforced.proxy.authDisabled).to.equal(false);
    expect(TokenVerifier.fromSnapshot(enforced.proxy).verify(generated.proxyToken!.secret)).not.to.equal(null);
    expect(await new LoginChecker(enforced.api).check('admin', generated.adminPassword!)).to.equal(true);
  });

  describe('revoked ids are remembered (a fleet never brings one back)', () => {
    const hash = '$2b$04$' + 'a'.repeat(53);
    const token = (id: string, createdAt = 1): { id: string; name: string; scope: 'proxy'; digest: string; createdAt: number } => ({ id, name: `token ${id}`, scope: 'proxy', digest: digestTokenSecret(`tp_${id}`.padEnd(25, 'x')), createdAt });

    it('loads a version-2 file (no revoked ids) as it was, and writes version 3 at its next save', async () => {
      const dir = await tempDir();
      await fsp.writeFile(path.join(dir, 'auth.json'), JSON.stringify({ version: 2, admin: { passwordHash: hash }, tokens: [token('old1'), token('old2')] }), { mode: 0o600 });
      const { store } = await open(configFor(dir));
      expect(store.listTokens().map((t) => t.id)).to.deep.equal(['old1', 'old2']);
      expect(store.revokedIds()).to.deep.equal([]);
      await store.revokeToken('old1').persisted;
      const written = JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')) as { version: number; tokens: { id: string }[]; revoked: string[] };
      expect(written.version).to.equal(3);
      expect(written.tokens.map((t) => t.id)).to.deep.equal(['old2']);
      expect(written.revoked).to.deep.equal(['old1']);
    });

    it('keeps a revocation across a restart, and never takes the token back from a list offered later', async () => {
      const dir = await tempDir();
      const first = await open(configFor(dir));
      const issued = await first.store.createToken({ name: 'to revoke', scope: 'proxy' });
      await first.store.revokeToken(issued.token.id).persisted;
      const { store } = await open(configFor(dir));
      expect(store.revokedIds()).to.deep.equal([issued.token.id]);
      const offered = [...store.issuedTokens(), issued.stored, token('fresh', 2)];
      const snapshots = store.replaceIssued(offered);
      expect(snapshots?.proxy.tokens.map((t) => t.id)).to.not.include(issued.token.id);
      expect(store.listTokens().map((t) => t.id)).to.include('fresh').and.not.include(issued.token.id);
      expect(TokenVerifier.fromSnapshot(store.snapshots().proxy).verify(issued.token.secret)).to.equal(null);
    });

    it('remembers revocations made elsewhere: drops the token held here, saves, and ignores ids it knows', async () => {
      const dir = await tempDir();
      await fsp.writeFile(path.join(dir, 'auth.json'), JSON.stringify({ version: 3, admin: { passwordHash: hash }, tokens: [token('keep'), token('gone')], revoked: ['before'] }), { mode: 0o600 });
      const { store } = await open(configFor(dir));
      const snapshots = store.rememberRevoked(['gone', 'before', 'never-held']);
      expect(snapshots?.proxy.tokens.map((t) => t.id)).to.deep.equal(['keep']);
      expect(store.revokedIds()).to.deep.equal(['before', 'gone', 'never-held']);
      expect(store.rememberRevoked(['gone', 'before']), 'nothing new').to.equal(null);
      expect(store.rememberRevoked(['only-an-id']), 'a new id, no token dropped').to.equal(null);
      await store.idle();
      const written = JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')) as { tokens: { id: string }[]; revoked: string[] };
      expect(written.tokens.map((t) => t.id)).to.deep.equal(['keep']);
      expect(written.revoked).to.deep.equal(['before', 'gone', 'never-held', 'only-an-id']);
    });

    it('forgets the oldest ids past the bound, and the file stays loadable', async () => {
      const dir = await tempDir();
      const { store } = await open(configFor(dir));
      store.rememberRevoked(Array.from({ length: 10_000 }, (_, i) => `r${i}`));
      store.rememberRevoked(['newest']);
      await store.idle();
      const ids = store.revokedIds();
      expect(ids).to.have.length(10_000);
      expect(ids[0]).to.equal('r1');
      expect(ids.at(-1)).to.equal('newest');
      const again = await open(configFor(dir));
      expect(again.store.revokedIds()).to.deep.equal(ids);
    });

    it('reset-admin-password keeps the revoked ids', async () => {
      const dir = await tempDir();
      await fsp.writeFile(path.join(dir, 'auth.json'), JSON.stringify({ version: 3, admin: { passwordHash: hash }, tokens: [], revoked: ['r1', 'r2'] }), { mode: 0o600 });
      await resetAdminPassword({ dataDir: dir, adminPasswordSet: false, log: quietLogger(), bcryptCost: TEST_BCRYPT_COST });
      expect((JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')) as { revoked: string[] }).revoked).to.deep.equal(['r1', 'r2']);
    });
  });

  describe('the signing secret lives apart from auth.json', () => {
    it('first boot writes it to signing.key (0600); auth.json holds no secret', async () => {
      const dir = await tempDir();
      const { store } = await open(configFor(dir));
      const keyFile = path.join(dir, 'signing.key');
      expect(modeOf(await fsp.stat(keyFile))).to.equal(0o600);
      const secret = parseSigningSecretFile(await fsp.readFile(keyFile, 'utf8'));
      expect(secret?.length).to.equal(32);
      const auth = JSON.parse(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8')) as Record<string, unknown>;
      expect(Object.keys(auth).sort()).to.deep.equal(['admin', 'revoked', 'tokens', 'version']);
      expect(auth.version).to.equal(3);
      // The same key after a restart: sign-ins survive it.
      expect((await open(configFor(dir))).store.snapshots().api.signingKey).to.equal(store.snapshots().api.signingKey);
    });

    it("moves a 0.1.0 file's secret into signing.key; sign-ins made before the upgrade stay valid", async () => {
      const dir = await tempDir();
      const legacySecret = Buffer.alloc(32, 9);
      const hash = '$2b$04$' + 'a'.repeat(53);
      const legacy = { version: 1, signingSecret: legacySecret.toString('base64'), admin: { passwordHash: hash }, tokens: [] };
      await fsp.writeFile(path.join(dir, 'auth.json'), JSON.stringify(legacy), { mode: 0o600 });
      const { store, generated } = await open(configFor(dir));
      expect(generated).to.deep.equal({ adminPassword: null, proxyToken: null });
      expect(store.snapshots().api.signingKey).to.equal(deriveSigningKey(legacySecret, 'admin', { kind: 'stored', hash }, false).toString('base64'));
      expect(parseSigningSecretFile(await fsp.readFile(path.join(dir, 'signing.key'), 'utf8'))).to.deep.equal(legacySecret);
      const text = await fsp.readFile(path.join(dir, 'auth.json'), 'utf8');
      expect(text).not.to.include(legacySecret.toString('base64'));
      expect(JSON.parse(text)).to.deep.equal({ version: 3, admin: { passwordHash: hash }, tokens: [], revoked: [] });
    });

    it('SIGNING_SECRET: nothing in DATA_DIR is an input of the key; another secret gives another key', async () => {
      const [a, b] = [await tempDir(), await tempDir()];
      const operator = { adminPassword: 'correct horse battery', signingSecret: 's'.repeat(40) };
      const first = (await open(configFor(a, operator))).store.snapshots().api.signingKey;
      const second = (await open(configFor(b, operator))).store.snapshots().api.signingKey;
      expect(first, 'same secret and password, different DATA_DIR').to.equal(second);
      expect(await fsp.readdir(a)).to.deep.equal(['auth.json']);
      const other = (await open(configFor(a, { ...operator, signingSecret: 't'.repeat(40) }))).store.snapshots().api.signingKey;
      expect(other).to.not.equal(first);
      // Without it, the key comes from a file a copy of DATA_DIR would carry: a different key.
      expect((await open(configFor(a, { adminPassword: operator.adminPassword }))).store.snapshots().api.signingKey).to.not.equal(first);
    });

    it('refuses a corrupt signing.key and leaves it as found', async () => {
      for (const content of ['', 'not base64!', Buffer.alloc(16).toString('base64'), `${Buffer.alloc(32).toString('base64')}\nextra`]) {
        const dir = await tempDir();
        await fsp.writeFile(path.join(dir, 'signing.key'), content);
        const error = await expectRejection(open(configFor(dir)), AuthStoreCorruptError);
        expect(error.file).to.equal(path.join(dir, 'signing.key'));
        expect(await fsp.readFile(path.join(dir, 'signing.key'), 'utf8')).to.equal(content);
        expect(await fsp.readdir(dir)).to.deep.equal(['signing.key']);
      }
    });

    it('property: the file parser returns 32 bytes or null, and never throws', () => {
      fc.assert(
        fc.property(fc.oneof(fc.string({ maxLength: 80 }), fc.uint8Array({ minLength: 30, maxLength: 34 }).map((b) => Buffer.from(b).toString('base64'))), (text) => {
          const secret = parseSigningSecretFile(text);
          if (secret !== null) expect(secret.length).to.equal(32);
        }),
        { numRuns: fuzzRuns(300) },
      );
    });
  });

  it('AUTH_DISABLED: tokens issued meanwhile are memory only (source auth-disabled), revocable, and gone after a restart', async () => {
    const dir = await tempDir();
    const { store } = await open(configFor(dir, { authDisabled: true }));
    const onDisk = await fsp.readFile(path.join(dir, 'auth.json'), 'utf8');
    const minted = await store.createToken({ name: 'minted unauthenticated', scope: 'admin' });
    expect(minted.token.source).to.equal('auth-disabled');
    expect(TokenVerifier.fromSnapshot(minted.snapshots.api).verify(minted.token.secret)).to.deep.equal({ id: minted.token.id, scope: 'admin' });
    expect(store.listTokens().find((t) => t.id === minted.token.id)?.source).to.equal('auth-disabled');
    expect(await fsp.readFile(path.join(dir, 'auth.json'), 'utf8'), 'auth.json untouched').to.equal(onDisk);
    const second = await store.createToken({ name: 'another', scope: 'proxy' });
    const revoked = store.revokeToken(second.token.id);
    await revoked.persisted;
    expect(revoked.token.source).to.equal('auth-disabled');
    expect(store.listTokens().map((t) => t.id)).not.to.include(second.token.id);

    // Restarted with authentication on: the minted token does not exist.
    const enforced = (await open(configFor(dir))).store;
    expect(enforced.listTokens().map((t) => t.id)).not.to.include(minted.token.id);
    expect(TokenVerifier.fromSnapshot(enforced.snapshots().api).verify(minted.token.secret)).to.equal(null);
  });

  it('changing ADMIN_USER, the password or AUTH_DISABLED and restarting invalidates every outstanding sign-in', async () => {
    const dir = await tempDir();
    const signIn = (api: { signingKey: string; adminUser: string }) => new SignInCredentials(api.signingKey, api.adminUser, 3_600_000);
    const base = { adminPassword: 'first password' };
    const original = (await open(configFor(dir, base))).store.snapshots().api;
    const session = signIn(original).issueSession().token;
    const ticket = signIn(original).issueTicket({ kind: 'session', user: 'admin' }).ticket;

    const restarted = (await open(configFor(dir, base))).store.snapshots().api;
    expect(signIn(restarted).verifySessionCredential(session).ok).to.equal(true);
    expect(signIn(restarted).verifyTicket(ticket).ok).to.equal(true);

    for (const changed of [
      { ...base, adminUser: 'root' },
      { adminPassword: 'second password' },
      { adminPassword: null },
      { ...base, authDisabled: true },
    ]) {
      const api = (await open(configFor(dir, changed))).store.snapshots().api;
      expect(api.signingKey).not.to.equal(original.signingKey);
      const verifier = new SignInCredentials(api.signingKey, original.adminUser, 3_600_000);
      expect(verifier.verifySessionCredential(session)).to.deep.equal({ ok: false, reason: 'invalid' });
      expect(verifier.verifyTicket(ticket)).to.deep.equal({ ok: false, reason: 'invalid' });
    }
  });

  it('a regenerated password also invalidates sign-ins made with the old one', async () => {
    const dir = await tempDir();
    const before = (await open(configFor(dir))).store.snapshots().api;
    const session = new SignInCredentials(before.signingKey, 'admin', 60_000).issueSession().token;
    await open(configFor(dir, { adminPassword: 'x' }));
    const after = (await open(configFor(dir))).store.snapshots().api;
    expect(new SignInCredentials(after.signingKey, 'admin', 60_000).verifySessionCredential(session).ok).to.equal(false);
  });
});
