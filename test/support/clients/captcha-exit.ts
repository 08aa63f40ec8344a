import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type { InstanceView } from '../../../shared/api/views.js';
import { ROUTABLE_STATES } from '../../../supervisor/health/health-machine.js';
import type { RunningService } from '../fixtures/service.js';
import { pollUntil } from '../waiting.js';
import type { HealApi } from './api-client.js';

/**
 * Runs `run` while the test network's whoami answers exit `ip` with a captcha page, and puts the
 * exit back to normal whatever happens. Waits `graceMs` first: reports made within ROTATION_GRACE
 * of the instance's last rotation would not be scored (the suites set it short).
 */
export async function whileExitServesCaptcha<T>(svc: RunningService, ip: string, graceMs: number, run: () => Promise<T>): Promise<T> {
  svc.net.whoami.setBehaviour(ip, 'captcha');
  try {
    await sleep(graceMs);
    return await run();
  } finally {
    svc.net.whoami.setBehaviour(ip, 'ok');
  }
}

/**
 * Waits until at least `atLeast` of the pool's instances (spares aside) are routable: ready,
 * answering their control ports, not rotating, not drained, in a routable health state, on an
 * exit. A report moves a session only when another instance can take it: after a run of earlier
 * tests' captchas from one token, one instance of a small pool may be quarantined again and again
 * (each report on probation sends it a rung further, to a restart with back-off), and another
 * rotating, and the report's answer is then a stay, not a move.
 */
export async function waitRoutableInstances(api: HealApi, atLeast: number, timeoutMs = 60_000): Promise<InstanceView[]> {
  const routable = (i: InstanceView): boolean => i.ready && i.responsive && !i.rotating && !i.draining && ROUTABLE_STATES.includes(i.health.state) && i.exit_ip !== '';
  return pollUntil(`${atLeast} instances routable`, async () => (await api.instances()).filter((i) => !i.spare), timeoutMs, {
    until: (all) => all.filter(routable).length >= atLeast,
  });
}

/** The captcha reports the audit trail holds for session `key` (a client reported what the site did). */
export async function captchaReportsOf(api: HealApi, key: string): Promise<AuditEvent[]> {
  return (await api.events(200)).filter((e) => e.session === key && e.type === 'instance' && e.details.kind === 'captcha');
}

/**
 * Runs `run` while whoami answers every exit of the test network with a captcha (not only the
 * pool's: a quarantined instance may come back on another exit), so that no rotation can help
 * and a client meets its retry bound.
 */
export async function whileEveryExitServesCaptcha<T>(svc: RunningService, graceMs: number, run: () => Promise<T>): Promise<T> {
  const ips = svc.net.exits.map((e) => e.address);
  for (const ip of ips) svc.net.whoami.setBehaviour(ip, 'captcha');
  try {
    await sleep(graceMs);
    return await run();
  } finally {
    for (const ip of ips) svc.net.whoami.setBehaviour(ip, 'ok');
  }
}

/** What the pool did with session `key` after its reports, from the audit trail (newest first). */
export interface ReportMoves {
  /** The report's own move, or the quarantine or site ban it caused (every exit's standing with the site may be burnt). */
  moves: AuditEvent[];
  /** Reports after which no other instance could take the session: it stayed (`from` = `to`). */
  stays: AuditEvent[];
}

export function reportMovesOf(events: readonly AuditEvent[], key: string): ReportMoves {
  const ours = events.filter((e) => e.session === key && e.type === 'assignment');
  const stayed = (e: AuditEvent): boolean => e.details.from === e.details.to;
  return {
    moves: ours.filter((e) => ['report', 'quarantine', 'site_ban'].includes(String(e.details.reason)) && !stayed(e)),
    stays: ours.filter((e) => e.details.reason === 'report' && stayed(e)),
  };
}

/**
 * Rotations the client asked for that moved session `key` (`POST /api/sessions/{key}/rotate`,
 * audited `rotate` with reason `rotate`). Not every `rotate` event naming the session: a free
 * instance given a fresh exit for the session's move (a report's too) is audited `rotate` with
 * the session as well.
 */
export function movingRotationsOf(events: readonly AuditEvent[], key: string): number {
  return events.filter((e) => e.type === 'rotate' && e.session === key && e.details.reason === 'rotate').length;
}

/**
 * The clients' contract for `tries` blocked tries of session `key`, each reported (issue 29): the
 * report moves the session (the pool's own move, or the quarantine or site ban it caused); when
 * the pool could not (every exit burnt for the site, the quarantines down to MIN_ROUTABLE: a stay,
 * audited from = to, answered moved: false), a client that tries again rotates the session
 * itself, and one at its bound does not. `clientRotations` is what the client says it asked;
 * without it (Scrapy's middleware does not count), the audited rotations that moved the session
 * are at most that many.
 */
export function expectEachTryMovedOrRotated(events: readonly AuditEvent[], key: string, tries: number, clientRotations?: number): void {
  const { moves, stays } = reportMovesOf(events, key);
  const seen = JSON.stringify(events.filter((e) => e.session === key).reverse().map((e) => ({ type: e.type, message: e.message, details: e.details })));
  expect(moves.length + stays.length, `every blocked try moved it, or said it could not; the session's events: ${seen}`).to.equal(tries);
  const last = [...moves, ...stays].sort((a, b) => b.id - a.id)[0];
  const rotationsDue = stays.length - (last !== undefined && stays.includes(last) ? 1 : 0);
  if (clientRotations !== undefined) {
    expect(clientRotations, `a rotation by the client after each stay but the last try's; the session's events: ${seen}`).to.equal(rotationsDue);
  } else {
    expect(movingRotationsOf(events, key), `no rotation by the client but after a stay; the session's events: ${seen}`).to.be.at.most(rotationsDue);
  }
}
