import { setTimeout as sleep } from 'node:timers/promises';
import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type { RunningService } from '../fixtures/service.js';
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
