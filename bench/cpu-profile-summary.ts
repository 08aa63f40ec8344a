/**
 * Reads a V8 .cpuprofile (written by `node --cpu-prof`) and sums self time by function and by
 * where the code lives, so a section can say what a process spent its busy time on.
 */
import fs from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds on the monotonic clock, the one process.hrtime() reads (Linux). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A stretch of time on process.hrtime()'s clock, in microseconds. */
export interface ProfileWindow {
  fromUs: number;
  toUs: number;
}

export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

export type CodeKind = 'exitpool' | 'node' | 'native' | 'gc' | 'other';

export interface ProfileSummary {
  /** Sampled time not idle, ms. */
  busyMs: number;
  byKind: Record<CodeKind, number>;
  /** Heaviest functions by self time, ms. */
  top: { name: string; kind: CodeKind; ms: number }[];
}

function kindOf(frame: ProfileNode['callFrame']): CodeKind | 'idle' {
  if (frame.functionName === '(idle)') return 'idle';
  if (frame.functionName === '(garbage collector)') return 'gc';
  if (frame.url.startsWith('node:')) return 'node';
  if (/\/(workers|shared|supervisor)\//.test(frame.url)) return 'exitpool';
  // C++ bindings (socket writes, connect, close: mostly the system calls themselves).
  if (frame.url === '' && !frame.functionName.startsWith('(')) return 'native';
  return 'other';
}

function shortUrl(url: string): string {
  const m = /\/((?:workers|shared|supervisor)\/.*)$/.exec(url);
  return m ? (m[1] as string) : url;
}

/** The profile a process wrote into `dir` with --cpu-prof (named with its PID), or undefined. */
export function profileFileOf(dir: string, pid: number): string | undefined {
  const file = fs.readdirSync(dir).find((f) => f.includes(`.${pid}.`) && f.endsWith('.cpuprofile'));
  return file === undefined ? undefined : path.join(dir, file);
}

/** Sums the samples taken inside the windows (so start-up, shutdown and other paths' rounds do not count). */
export function summariseCpuProfile(file: string, windows: readonly ProfileWindow[], topN = 8): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const byKind: Record<CodeKind, number> = { exitpool: 0, node: 0, native: 0, gc: 0, other: 0 };
  const byFunction = new Map<string, { kind: CodeKind; us: number }>();
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (!windows.some((w) => at >= w.fromUs && at <= w.toUs)) return;
    const frame = (nodes.get(id) as ProfileNode).callFrame;
    const kind = kindOf(frame);
    if (kind === 'idle') return;
    const us = profile.timeDeltas[i] ?? 0;
    busy += us;
    byKind[kind] += us / 1000;
    const name = `${frame.functionName || '(anonymous)'}${frame.url ? ` ${shortUrl(frame.url)}:${frame.lineNumber + 1}` : ''}`;
    const entry = byFunction.get(name) ?? { kind, us: 0 };
    entry.us += us;
    byFunction.set(name, entry);
  });
  const top = [...byFunction]
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, topN)
    .map(([name, e]) => ({ name, kind: e.kind, ms: e.us / 1000 }));
  return { busyMs: busy / 1000, byKind, top };
}
