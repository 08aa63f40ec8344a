/**
 * A systemd service unit read and run the way systemd runs it, for machines where systemd is not
 * PID 1 (containers, CI): the test then exercises the shipped unit's own command line,
 * environment, state directory and stop semantics instead of a hand-written copy of them.
 * Only what deploy/exitpool.service uses is understood; anything else in [Service] is kept as
 * text for the test to assert on.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { childPids, isAlive, signal } from './inspection.js';

/** systemd's default PATH for system services (systemd.exec(5), "Environment variables"). */
const SYSTEMD_DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin';
/** Where StateDirectory= names are created (systemd.exec(5), "RuntimeDirectory=, StateDirectory=…"). */
const STATE_DIRECTORY_ROOT = '/var/lib';

export class UnitFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnitFormatError';
  }
}

export interface ServiceUnit {
  /** Every assignment of [Service], in order (Environment= may repeat). */
  readonly settings: ReadonlyMap<string, readonly string[]>;
  /** ExecStart= split into words as systemd splits it. */
  readonly execStart: readonly string[];
  readonly workingDirectory: string;
  /** Environment= assignments, later ones winning. */
  readonly environment: Readonly<Record<string, string>>;
  /** EnvironmentFile= paths; optional when written with a leading '-'. */
  readonly environmentFiles: readonly { path: string; optional: boolean }[];
  /** StateDirectory= names, created under /var/lib with StateDirectoryMode= before the start. */
  readonly stateDirectories: readonly string[];
  readonly stateDirectoryMode: number;
  readonly umask: number | null;
  readonly killMode: string;
  readonly killSignal: NodeJS.Signals;
  readonly timeoutStopMs: number;
}

/**
 * Splits a value into words the way systemd does for ExecStart= and Environment=: whitespace
 * separates, double or single quotes group, a backslash escapes the next character.
 */
export function unitWords(value: string): string[] {
  const words: string[] = [];
  let word = '';
  let quote: '"' | "'" | null = null;
  let inWord = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i] as string;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < value.length) word += value[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < value.length) {
      word += value[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new UnitFormatError(`unterminated quote in ${JSON.stringify(value)}`);
  if (inWord) words.push(word);
  return words;
}

function assignment(word: string): [string, string] {
  const at = word.indexOf('=');
  if (at <= 0) throw new UnitFormatError(`not an assignment: ${JSON.stringify(word)}`);
  return [word.slice(0, at), word.slice(at + 1)];
}

function single(settings: ReadonlyMap<string, readonly string[]>, key: string, fallback?: string): string {
  const values = settings.get(key);
  const value = values?.[values.length - 1] ?? fallback;
  if (value === undefined) throw new UnitFormatError(`[Service] has no ${key}=`);
  return value;
}

/** Seconds as systemd writes them in TimeoutStopSec= ("40", "40s", "1min 30s"). */
function timespanMs(text: string): number {
  const units: Record<string, number> = { '': 1000, s: 1000, sec: 1000, m: 60_000, min: 60_000, ms: 1 };
  let total = 0;
  for (const part of text.trim().split(/\s+/)) {
    const m = /^(\d+)([a-z]*)$/.exec(part);
    const unit = m ? units[m[2] as string] : undefined;
    if (!m || unit === undefined) throw new UnitFormatError(`a time span systemd reads and this test does not: ${JSON.stringify(text)}`);
    total += Number(m[1]) * unit;
  }
  return total;
}

/** The [Service] section of a unit file. */
export function parseServiceUnit(text: string): ServiceUnit {
  const settings = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1] as string;
      continue;
    }
    if (section !== 'Service') continue;
    const [key, value] = assignment(line);
    settings.set(key, [...(settings.get(key) ?? []), value]);
  }
  // A leading '-', '@', '+', '!' or ':' changes how systemd treats the command, not what it runs.
  const execStart = unitWords(single(settings, 'ExecStart').replace(/^[-@+!:]+/, ''));
  const environment: Record<string, string> = {};
  for (const value of settings.get('Environment') ?? []) for (const word of unitWords(value)) Object.assign(environment, Object.fromEntries([assignment(word)]));
  const killSignal = single(settings, 'KillSignal', 'SIGTERM');
  const umask = settings.has('UMask') ? parseInt(single(settings, 'UMask'), 8) : null;
  return {
    settings,
    execStart,
    workingDirectory: single(settings, 'WorkingDirectory'),
    environment,
    environmentFiles: (settings.get('EnvironmentFile') ?? []).map((v) => (v.startsWith('-') ? { path: v.slice(1), optional: true } : { path: v, optional: false })),
    stateDirectories: (settings.get('StateDirectory') ?? []).flatMap((v) => unitWords(v)),
    stateDirectoryMode: parseInt(single(settings, 'StateDirectoryMode', '0755'), 8),
    umask,
    killMode: single(settings, 'KillMode', 'control-group'),
    killSignal: (killSignal.startsWith('SIG') ? killSignal : `SIG${killSignal}`) as NodeJS.Signals,
    timeoutStopMs: timespanMs(single(settings, 'TimeoutStopSec', '90')),
  };
}

/**
 * An EnvironmentFile= as systemd reads it: KEY=VALUE lines, '#' and ';' comments, single quotes
 * literal, double quotes and bare values with backslash escapes.
 */
export function parseEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const [key, value] = assignment(line);
    env[key.trim()] = unitWords(value).join(' ');
  }
  return env;
}

/** A line of an environment file that reads back as `value` whatever it holds (but a quote). */
export function environmentFileLine(key: string, value: string): string {
  if (value.includes("'")) throw new UnitFormatError(`${key}: a single quote cannot be written in single quotes`);
  return `${key}='${value}'`;
}

/**
 * Where the unit's absolute paths live on this machine: the install directory the unit names as
 * WorkingDirectory, /var/lib (StateDirectory=) and each EnvironmentFile=.
 */
export interface UnitPlacement {
  installDir: string;
  stateRoot: string;
  environmentFiles: Readonly<Record<string, string>>;
}

export interface RunningUnit {
  /** The main process (systemd's MainPID): the service itself once /usr/bin/env has exec'd it. */
  readonly pid: number;
  output(): string;
  /**
   * `systemctl stop`: KillSignal= to the main process only (KillMode=mixed), then until
   * TimeoutStopSec for the main process and everything it started to end; whatever is left
   * then is SIGKILLed, as systemd does to the cgroup, and returned in `leftovers`.
   */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; leftovers: number[] }>;
}

/** The main process and everything under it now (systemd's cgroup, as far as a process tree shows it). */
function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...childPids(all[i] as number));
  return all;
}

/**
 * Starts the unit as systemd would: its StateDirectory= created with StateDirectoryMode= (kept
 * across restarts), a clean environment of systemd's PATH, STATE_DIRECTORY, Environment= and then
 * EnvironmentFile= (which wins, systemd.exec(5)), UMask=, ExecStart= in WorkingDirectory=.
 * Absolute paths of the unit are moved to `placement`; User= is not applied (the test's user).
 */
export function startUnit(unit: ServiceUnit, placement: UnitPlacement): RunningUnit {
  if (unit.killMode !== 'mixed') throw new UnitFormatError(`KillMode=${unit.killMode}: only mixed is emulated`);
  const relocate = (p: string): string => {
    if (p === unit.workingDirectory || p.startsWith(`${unit.workingDirectory}/`)) return placement.installDir + p.slice(unit.workingDirectory.length);
    if (p.startsWith(`${STATE_DIRECTORY_ROOT}/`)) return placement.stateRoot + p.slice(STATE_DIRECTORY_ROOT.length);
    return p;
  };
  // Inside a word too: ExecStart's PATH=/opt/exitpool/node_modules/.bin:/usr/bin is one word.
  const relocateWord = (w: string): string => w.split(/(?<=[=:])/).map((part) => {
    const tail = part.match(/[=:]$/)?.[0] ?? '';
    return relocate(part.slice(0, part.length - tail.length)) + tail;
  }).join('');

  const stateDirs = unit.stateDirectories.map((name) => path.join(placement.stateRoot, name));
  for (const dir of stateDirs) {
    fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dir, unit.stateDirectoryMode);
  }
  const env: Record<string, string> = { PATH: SYSTEMD_DEFAULT_PATH };
  if (stateDirs.length > 0) env.STATE_DIRECTORY = stateDirs.join(':');
  for (const [k, v] of Object.entries(unit.environment)) env[k] = relocateWord(v);
  for (const file of unit.environmentFiles) {
    const local = placement.environmentFiles[file.path];
    if (local === undefined || !fs.existsSync(local)) {
      if (file.optional) continue;
      throw new UnitFormatError(`EnvironmentFile=${file.path} is required and not placed`);
    }
    Object.assign(env, parseEnvironmentFile(fs.readFileSync(local, 'utf8')));
  }
  const argv = unit.execStart.map(relocateWord);
  // systemd sets the umask before exec; a shell that execs keeps the pid, as systemd's MainPID.
  const command = unit.umask === null ? argv : ['/bin/sh', '-c', `umask ${unit.umask.toString(8).padStart(4, '0')} && exec "$@"`, 'sh', ...argv];
  const child: ChildProcess = spawn(command[0] as string, command.slice(1), { cwd: relocate(unit.workingDirectory), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return {
    pid: child.pid as number,
    output: () => out,
    async stop() {
      const tree = processTree(child.pid as number);
      child.kill(unit.killSignal);
      const deadline = Date.now() + unit.timeoutStopMs;
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([exited, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), unit.timeoutStopMs)))]);
      clearTimeout(timer);
      while (Date.now() < deadline && tree.some(isAlive)) await new Promise((r) => setTimeout(r, 100));
      const leftovers = tree.filter(isAlive);
      for (const pid of leftovers) signal(pid, 'SIGKILL');
      return { ...(result ?? (await exited)), leftovers };
    },
  };
}
