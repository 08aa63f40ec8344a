/**
 * `exitpool check-config`: what a start would find wrong, found without starting anything (no
 * tor, no worker, no listener left open). The configuration is loaded and validated as `serve`
 * does it (the CLI does that part); here the environment around it is checked: the Node that
 * runs, DATA_DIR, the credential files, the tor binary, the listeners' ports, the state store.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Config } from '../shared/config/index.js';
import { errorMessage } from '../shared/errors/error-message.js';
import { AUTH_FILE_NAME, MAX_AUTH_FILE_BYTES, parseAuthFile } from './auth/auth-file.js';
import { parseSigningSecretFile, SIGNING_SECRET_FILE_NAME } from './auth/signing-secret-file.js';
import { checkTorBinary } from './startup/tor-binary-check.js';

/** A Redis that does not answer a PING within this long fails the check (a start waits longer). */
export const REDIS_CHECK_TIMEOUT_MS = 5_000;

export interface CheckOutcome {
  /** What was checked: a setting (`DATA_DIR`, `API_PORT`) or a thing (`Node.js`, `auth.json`). */
  subject: string;
  ok: boolean;
  /** One line: what was found, or what is wrong and what to change. */
  detail: string;
}

export interface CheckOptions {
  /** Environment for `tor --version` (the demo's and tests' LD_PRELOAD guard); the process's otherwise. */
  torEnv?: NodeJS.ProcessEnv;
}

/** Every check, in the order a start meets them; none stops the others. */
export async function checkEnvironment(config: Config, options: CheckOptions = {}): Promise<CheckOutcome[]> {
  const outcomes: CheckOutcome[] = [nodeCheck(), await dataDirCheck(config.dataDir)];
  outcomes.push(await authFileCheck(config));
  const signing = await signingKeyCheck(config);
  if (signing) outcomes.push(signing);
  outcomes.push(await torCheck(config, options));
  const inFleet = config.stateStore !== 'sqlite' && config.stateStore !== 'none';
  for (const [setting, port] of [
    ['SOCKS_PORT', config.socksPort],
    ['HTTP_PORT', config.httpPort],
    ['API_PORT', config.apiPort],
    // The hop listener opens only on a node of a fleet.
    ...(inFleet ? [['HOP_PORT', config.hopPort] as const] : []),
  ] as const) {
    outcomes.push(await portCheck(setting, config.bindHost, port));
  }
  outcomes.push(await stateStoreCheck(config));
  return outcomes;
}

function nodeCheck(): CheckOutcome {
  return { subject: 'Node.js', ok: true, detail: `${process.versions.node} (${process.execPath})` };
}

/** DATA_DIR must be a directory this user can create files in, or a path it can create. */
async function dataDirCheck(dataDir: string): Promise<CheckOutcome> {
  const subject = `DATA_DIR=${dataDir}`;
  let stat: fs.Stats;
  try {
    stat = await fsp.stat(dataDir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return { subject, ok: false, detail: `cannot be read: ${errorMessage(e)}` };
    const parent = await nearestExisting(path.dirname(path.resolve(dataDir)));
    try {
      await fsp.access(parent, fs.constants.W_OK | fs.constants.X_OK);
    } catch {
      return { subject, ok: false, detail: `does not exist, and ${parent} does not let this user create it` };
    }
    return { subject, ok: true, detail: `does not exist yet: the first start creates it (mode 0700) in ${parent}` };
  }
  if (!stat.isDirectory()) return { subject, ok: false, detail: 'is not a directory' };
  // A file made and removed, not access(2): root passes access() on a read-only or immutable directory.
  const probe = path.join(dataDir, `.exitpool-check-${randomBytes(6).toString('hex')}`);
  try {
    await (await fsp.open(probe, 'wx', 0o600)).close();
    await fsp.unlink(probe);
  } catch (e) {
    return { subject, ok: false, detail: `cannot be written: ${errorMessage(e)}` };
  }
  return { subject, ok: true, detail: 'a writable directory' };
}

async function nearestExisting(dir: string): Promise<string> {
  for (let at = dir; ; at = path.dirname(at)) {
    try {
      await fsp.stat(at);
      return at;
    } catch {
      if (path.dirname(at) === at) return at;
    }
  }
}

/** auth.json read as the start reads it (a file the start would refuse is a failure here), without changing it. */
async function authFileCheck(config: Config): Promise<CheckOutcome> {
  const file = path.join(config.dataDir, AUTH_FILE_NAME);
  const subject = AUTH_FILE_NAME;
  let text: string;
  try {
    const stat = await fsp.stat(file);
    if (!stat.isFile()) return { subject, ok: false, detail: `${file} is not a regular file: the start refuses it` };
    if (stat.size > MAX_AUTH_FILE_BYTES) return { subject, ok: false, detail: `${file} is larger than ${MAX_AUTH_FILE_BYTES} bytes: the start refuses it` };
    text = await fsp.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      return { subject, ok: true, detail: 'none yet: the first start generates a dashboard password and a proxy token and prints them' };
    }
    return { subject, ok: false, detail: `${file} cannot be read: ${errorMessage(e)}` };
  }
  let parsed;
  try {
    parsed = parseAuthFile(text);
  } catch (e) {
    return { subject, ok: false, detail: `${file} ${errorMessage(e)}: the start refuses it (restore it, or move it away to have new credentials generated)` };
  }
  const password =
    config.adminPassword !== null
      ? 'dashboard password from ADMIN_PASSWORD'
      : parsed.contents.admin.passwordHash === null
        ? 'no dashboard password stored: the next start generates one and prints it'
        : 'dashboard password stored';
  const tokens = parsed.contents.tokens.length;
  return { subject, ok: true, detail: `${tokens} token${tokens === 1 ? '' : 's'}, ${password}` };
}

/** signing.key, when the service would read it (no SIGNING_SECRET) and it exists. */
async function signingKeyCheck(config: Config): Promise<CheckOutcome | null> {
  if (config.signingSecret !== null) return null;
  const file = path.join(config.dataDir, SIGNING_SECRET_FILE_NAME);
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return { subject: SIGNING_SECRET_FILE_NAME, ok: false, detail: `${file} cannot be read: ${errorMessage(e)}` };
  }
  return parseSigningSecretFile(text) === null
    ? { subject: SIGNING_SECRET_FILE_NAME, ok: false, detail: `${file} is not a signing secret: the start refuses it (delete it to sign everyone out and have a new one made)` }
    : { subject: SIGNING_SECRET_FILE_NAME, ok: true, detail: 'a signing secret' };
}

async function torCheck(config: Config, options: CheckOptions): Promise<CheckOutcome> {
  const subject = `TOR_BINARY=${config.torBinary}`;
  try {
    return { subject, ok: true, detail: await checkTorBinary(config.torBinary, options.torEnv) };
  } catch (e) {
    return { subject, ok: false, detail: errorMessage(e).replace(/^TOR_BINARY: /, '') };
  }
}

/** The port can be listened on now (opened and closed at once). */
async function portCheck(setting: string, host: string, port: number): Promise<CheckOutcome> {
  const subject = `${setting}=${port}`;
  const where = `${host}:${port}`;
  const server = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const detail =
      code === 'EADDRINUSE'
        ? `${where} is already in use by another process (a running exitpool's own ports show so)`
        : code === 'EACCES'
          ? `not allowed to listen on ${where} (ports below 1024 need privileges)`
          : code === 'EADDRNOTAVAIL'
            ? `BIND_HOST=${host} is not an address of this machine`
            : code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL'
              ? `BIND_HOST=${host}: the name does not resolve (${code})`
              : `cannot listen on ${where}: ${errorMessage(e)}`;
    return { subject, ok: false, detail };
  }
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { subject, ok: true, detail: `${where} is free` };
}

async function stateStoreCheck(config: Config): Promise<CheckOutcome> {
  const store = config.stateStore;
  if (store === 'none') return { subject: 'STATE_STORE=none', ok: true, detail: 'nothing is kept across restarts' };
  if (store === 'sqlite') {
    try {
      await import('node:sqlite');
    } catch (e) {
      return { subject: 'STATE_STORE=sqlite', ok: false, detail: `this Node.js (${process.versions.node}) has no node:sqlite (${errorMessage(e)}): run exitpool with Node.js 24 or newer` };
    }
    return { subject: 'STATE_STORE=sqlite', ok: true, detail: `node:sqlite is available; the state goes to ${path.join(config.dataDir, 'state.db')}` };
  }
  // The Redis modules load only here, as in the service.
  const { redisClient, redisLocation, closeRedis } = await import('./state/redis-location.js');
  const where = redisLocation(store);
  const subject = `STATE_STORE=${where.shown}`;
  const redis = redisClient(where, { commandTimeoutMs: REDIS_CHECK_TIMEOUT_MS });
  // The connection's own error (ECONNREFUSED, a wrong password) says more than the command's.
  let connectionError: unknown = null;
  redis.on('error', (e: unknown) => (connectionError ??= e));
  try {
    await withTimeout(redis.connect(), REDIS_CHECK_TIMEOUT_MS);
    await redis.ping();
    return { subject, ok: true, detail: 'Redis answers' };
  } catch (e) {
    return { subject, ok: false, detail: `Redis cannot be reached: ${errorMessage(connectionError ?? e)} (a start refuses while it cannot)` };
  } finally {
    // A client that never connected would keep retrying: dropped at once.
    if (redis.status === 'ready') await closeRedis(redis);
    else redis.disconnect();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
