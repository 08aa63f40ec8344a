import fs from 'node:fs/promises';
import path from 'node:path';
import { errorMessage } from '../shared/errors/error-message.js';
import type { Logger } from '../shared/logger.js';
import { AUTH_FILE_NAME } from './auth/auth-file.js';
import { SIGNING_SECRET_FILE_NAME } from './auth/signing-secret-file.js';
import { STATE_FILE_NAME } from './state/sqlite-state-store.js';
import { StartupError } from './startup/startup-error.js';

/**
 * DATA_DIR holds every session key (what separates one client's sessions from another's), the
 * audit trail (client addresses, token ids), the credentials' digests and the signing secret:
 * nobody but the service's user may read it. At start the directory is made 0700 and the files
 * the service keeps in it 0600, whatever the umask and whoever created them first (an operator's
 * `mkdir`, a bind mount, an earlier release). A directory the service cannot make private (a
 * mounted volume it does not own) refuses the start, except one shared with a group on purpose:
 * Kubernetes' `fsGroup` gives the pod's group the volume, with the setgid bit, and nothing to
 * other users.
 */

export const DATA_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
/** Access for the group and for others. */
const GROUP_OR_OTHER = 0o077;
const OTHER = 0o007;
/** What a directory shared with a group on purpose carries: new files get its group. */
const SETGID = 0o2000;

/** The tor DataDirectories' parent (supervisor/tor/instance-options.ts: DATA_DIR/tor/N). */
const TOR_DIRECTORY = 'tor';
/** Files the service keeps in DATA_DIR, and what a state file moved aside is called. */
const PRIVATE_FILES = [AUTH_FILE_NAME, SIGNING_SECRET_FILE_NAME, STATE_FILE_NAME, `${STATE_FILE_NAME}-wal`, `${STATE_FILE_NAME}-shm`];
const MOVED_ASIDE_PREFIX = `${STATE_FILE_NAME}.unusable-`;

/** Who the service runs as: the owner it needs, and the groups a shared directory may have. */
export interface ProcessIdentity {
  uid: number;
  groups: readonly number[];
}

export function currentIdentity(): ProcessIdentity {
  return { uid: process.getuid?.() ?? 0, groups: process.getgroups?.() ?? [] };
}

export type DirectoryVerdict =
  | { kind: 'private' }
  /** This user's (or root's to change), too open: made DATA_DIR_MODE. */
  | { kind: 'tighten' }
  /** Not this user's, shared with one of its groups on purpose, nothing for others: kept. */
  | { kind: 'group-shared' }
  | { kind: 'refuse'; reason: string };

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

/**
 * What to do with DATA_DIR as found. Pure: the rules are table-tested
 * (test/unit/data-directory.test.ts).
 */
export function judgeDataDirectory(found: { mode: number; uid: number; gid: number }, who: ProcessIdentity): DirectoryVerdict {
  const ours = found.uid === who.uid;
  if (ours && (found.mode & GROUP_OR_OTHER) === 0) return { kind: 'private' };
  // root may change any directory's mode.
  if (ours || who.uid === 0) return { kind: 'tighten' };
  const groupOnPurpose = (found.mode & SETGID) !== 0 && (found.mode & OTHER) === 0 && (found.mode & 0o070) === 0o070 && who.groups.includes(found.gid);
  if (groupOnPurpose) return { kind: 'group-shared' };
  return {
    kind: 'refuse',
    reason:
      `is mode ${octal(found.mode)} and owned by uid ${found.uid}, not by this user (uid ${who.uid}), so it cannot be made private (0700): ` +
      'chown it to this user, or point DATA_DIR at a directory of its own (a subdirectory of the volume, which exitpool creates 0700); ' +
      'a volume shared with this user’s group on purpose needs the setgid bit and no access for others (Kubernetes fsGroup)',
  };
}

/**
 * Makes one entry DATA_DIR_MODE (a directory) or PRIVATE_FILE_MODE (a file) when it is too open;
 * returns its earlier mode when it was. Anything else at that name (a link, a socket) is left.
 */
async function tightenEntry(file: string, mode: number, who: ProcessIdentity): Promise<number | null> {
  let stat;
  try {
    stat = await fs.lstat(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StartupError('DATA_DIR', `${file} cannot be read (${errorMessage(error)})`);
  }
  // A symbolic link is not followed: its target is not the service's to change.
  const expected = mode === DATA_DIR_MODE ? stat.isDirectory() : stat.isFile();
  if (!expected || (stat.mode & GROUP_OR_OTHER) === 0) return null;
  if (stat.uid !== who.uid && who.uid !== 0) {
    throw new StartupError('DATA_DIR', `${file} is mode ${octal(stat.mode)} and owned by uid ${stat.uid}, not by this user (uid ${who.uid}): make it this user's, or remove it`);
  }
  try {
    await fs.chmod(file, mode);
  } catch (error) {
    throw new StartupError('DATA_DIR', `${file} is mode ${octal(stat.mode)} and cannot be made ${octal(mode)} (${errorMessage(error)})`);
  }
  return stat.mode & 0o7777;
}

export interface PreparedDataDirectory {
  /** The directory is another user's, shared with one of this user's groups (fsGroup). */
  groupShared: boolean;
  /** Entries whose modes were tightened, with what they were. */
  tightened: { path: string; was: string }[];
}

/**
 * Creates DATA_DIR (0700) or makes it private, and tightens what the service keeps in it (the
 * state files, auth.json, signing.key, the tor DataDirectories, a state file moved aside). Says
 * in the log what it changed; refuses the start (StartupError naming DATA_DIR, exit 78) where it
 * cannot. Run first at start, before anything writes there.
 */
export async function prepareDataDirectory(dir: string, log: Logger, who: ProcessIdentity = currentIdentity()): Promise<PreparedDataDirectory> {
  try {
    // The mode applies to every directory this creates; the umask can only take bits away from it.
    await fs.mkdir(dir, { recursive: true, mode: DATA_DIR_MODE });
  } catch (error) {
    throw new StartupError('DATA_DIR', `${dir} cannot be created (${errorMessage(error)})`);
  }
  let found;
  try {
    found = await fs.stat(dir);
  } catch (error) {
    throw new StartupError('DATA_DIR', `${dir} cannot be read (${errorMessage(error)})`);
  }
  if (!found.isDirectory()) throw new StartupError('DATA_DIR', `${dir} is not a directory`);
  const tightened: PreparedDataDirectory['tightened'] = [];
  const verdict = judgeDataDirectory(found, who);
  switch (verdict.kind) {
    case 'refuse':
      throw new StartupError('DATA_DIR', `${dir} ${verdict.reason}`);
    case 'tighten':
      try {
        await fs.chmod(dir, DATA_DIR_MODE);
      } catch (error) {
        throw new StartupError('DATA_DIR', `${dir} is mode ${octal(found.mode)} and cannot be made 0700 (${errorMessage(error)})`);
      }
      tightened.push({ path: dir, was: octal(found.mode) });
      break;
    case 'group-shared':
      log.info('DATA_DIR is shared with this user’s group on purpose (setgid, nothing for others): its mode is kept', { dir, mode: octal(found.mode), gid: found.gid });
      break;
    case 'private':
      break;
  }
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (error) {
    throw new StartupError('DATA_DIR', `${dir} cannot be listed (${errorMessage(error)})`);
  }
  const files = names.filter((n) => PRIVATE_FILES.includes(n) || n.startsWith(MOVED_ASIDE_PREFIX)).map((n) => path.join(dir, n));
  const directories = [path.join(dir, TOR_DIRECTORY)];
  if (names.includes(TOR_DIRECTORY)) {
    const tor = await fs.readdir(path.join(dir, TOR_DIRECTORY)).catch(() => [] as string[]);
    directories.push(...tor.map((n) => path.join(dir, TOR_DIRECTORY, n)));
  }
  for (const [entries, mode] of [
    [files, PRIVATE_FILE_MODE],
    [directories, DATA_DIR_MODE],
  ] as const) {
    for (const entry of entries) {
      const was = await tightenEntry(entry, mode, who);
      if (was !== null) tightened.push({ path: entry, was: octal(was) });
    }
  }
  for (const t of tightened) log.warn('DATA_DIR: readable by other users; made private', { path: t.path, was: t.was, now: t.path === dir || directories.includes(t.path) ? '0700' : '0600' });
  return { groupShared: verdict.kind === 'group-shared', tightened };
}
