import { rmSync } from 'node:fs';
import { constants } from 'node:os';

/**
 * Last-resort owner of every tor the network starts: when Node exits for any reason (test
 * failure, uncaught exception, process.exit, a terminating signal) the children are killed
 * synchronously, because no asynchronous stop() can run any more. Orphans that survive even
 * this (Node SIGKILLed) exit on their own through __OwningControllerProcess, and the next start
 * reaps their work dirs (stale-runs.ts).
 */
const livePids = new Map<number, string>();
const workDirs = new Set<string>();
let installed = false;
let tearingDown = false;

const TERMINATING_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function killEverythingNow(): void {
  tearingDown = true;
  for (const pid of livePids.keys()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  livePids.clear();
  for (const dir of workDirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // a SIGKILLed tor may still be writing; the next start's stale-run reaper removes it
    }
  }
  workDirs.clear();
}

/** The signals on which a caller stops the network in order itself (handOverSignals). */
const signalOwners = new Set<NodeJS.Signals>();

function onSignal(signal: NodeJS.Signals): void {
  // A caller that said it owns the shutdown on this signal (the demo) stops the network in
  // order: the service's tors before the directories they write to; the 'exit' hook still kills
  // whatever is left when the process ends. Anyone else listening (mocha, playwright's browser
  // closer) is no such promise: counting listeners once left a SIGTERMed test run, and its tors,
  // running.
  if (signalOwners.has(signal)) return;
  killEverythingNow();
  process.exit(128 + (constants.signals[signal] ?? 15));
}

/**
 * Says that the caller handles `signals` itself and stops the network in order: from now on
 * those signals no longer kill the tors at once (the 'exit' hook still does, when the process
 * ends).
 */
export function handOverSignals(signals: readonly NodeJS.Signals[]): void {
  install();
  for (const s of signals) signalOwners.add(s);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', killEverythingNow);
  for (const signal of TERMINATING_SIGNALS) process.on(signal, onSignal);
}

export function trackChildPid(pid: number, label: string): void {
  install();
  livePids.set(pid, label);
}

export function untrackChildPid(pid: number): void {
  livePids.delete(pid);
}

/** Removed at exit unless untracked first (stop() with keepWorkDir untracks it). */
export function trackWorkDir(dir: string): void {
  install();
  workDirs.add(dir);
}

export function untrackWorkDir(dir: string): void {
  workDirs.delete(dir);
}

/** True once the process is going down: a tor dying now was killed by us, not a failure. */
export function isEmergencyTeardown(): boolean {
  return tearingDown;
}
