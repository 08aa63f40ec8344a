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
