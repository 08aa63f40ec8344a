/**
 * Attributes a V8 .cpuprofile's busy time to concerns by where each sample's stack passes (the
 * first rule that matches any frame, rules in priority order), so a section can say "a quarter
 * of the supervisor is tor's control port" rather than list leaf functions.
 */
import fs from 'node:fs';
import type { ProfileWindow } from './cpu-profile-summary.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ConcernRule {
  concern: string;
  /** Matches a frame's URL (or its function name, for V8's pseudo-frames). */
  frame: RegExp;
}

/** The supervisor's concerns, most specific first (pool code called from IPC is the pool's). */
export const SUPERVISOR_CONCERNS: readonly ConcernRule[] = [
  { concern: 'garbage collection', frame: /^\(garbage collector\)$/ },
  { concern: 'metrics (prom-client)', frame: /\/supervisor\/metrics\/|prom-client/ },
  { concern: 'pool, sessions, health, statistics', frame: /\/supervisor\/(pool|sessions|health|stats|routing|audit)\// },
  { concern: 'tor control port (events, exit tracking)', frame: /\/supervisor\/tor\// },
  { concern: 'IPC with the workers (channel, JSON)', frame: /\/shared\/ipc\/|node:internal\/child_process|node:internal\/cluster/ },
  { concern: 'logging', frame: /winston|logform|\/shared\/logger/ },
];

/** Busy ms per concern inside the windows; what matches no rule is 'other'. */
export function concernsOf(file: string, windows: readonly ProfileWindow[], rules: readonly ConcernRule[]): { busyMs: number; byConcern: Map<string, number> } {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const memo = new Map<number, string | null>();
  const concernOf = (id: number): string | null => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const stack: ProfileNode[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(nodes.get(at) as ProfileNode);
    let found: string | null = 'other';
    if (stack[0]?.callFrame.functionName === '(idle)' || stack[0]?.callFrame.functionName === '(program)') found = null;
    else {
      outer: for (const rule of rules) {
        for (const f of stack) {
          if (rule.frame.test(f.callFrame.url) || rule.frame.test(f.callFrame.functionName)) {
            found = rule.concern;
            break outer;
          }
        }
      }
    }
    memo.set(id, found);
    return found;
  };
  const byConcern = new Map<string, number>();
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (!windows.some((w) => at >= w.fromUs && at <= w.toUs)) return;
    const concern = concernOf(id);
    if (concern === null) return;
    busy += us;
    byConcern.set(concern, (byConcern.get(concern) ?? 0) + us / 1000);
  });
  return { busyMs: busy / 1000, byConcern };
}
