import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type { StreamSnapshot } from '../logic/snapshot.js';
import type { ApiClient } from '../api/client.js';
import { ForbiddenError, UnauthorizedError, describeError } from '../logic/api-errors.js';
import { afterLoss } from '../logic/backoff.js';
import type { StreamStatus } from '../logic/stream-status.js';
import { streamUrl, ticketRenewDelayMs, ticketUsable, type HeldTicket } from '../logic/ticket-schedule.js';

export type { StreamStatus };

export interface LiveStreamHandlers {
  state(snapshot: StreamSnapshot): void;
  event(event: AuditEvent): void;
  status(status: StreamStatus): void;
}

/**
 * The dashboard's connection to GET /api/stream. The browser's EventSource cannot send an
 * Authorization header, so each connection presents a 60-second ticket in the query; one is
 * kept fresh by a renewal timer. A lost connection is reopened with exponential backoff (and
 * a new ticket if needed) rather than by EventSource's own retry, which would replay an
 * expired ticket. While the tab is hidden the stream, the renewal and any pending retry are
 * stopped: a hidden tab makes no requests at all.
 */
export class LiveStream {
  private source: EventSource | null = null;
  private ticket: HeldTicket | null = null;
  private renewTimer: number | null = null;
  private retryTimer: number | null = null;
  private failures = 0;
  private openedAt: number | null = null;
  /** Bumped whenever the connection is torn down, so late async results are ignored. */
  private generation = 0;
  private started = false;

  constructor(
    private readonly api: ApiClient,
    private readonly on: LiveStreamHandlers,
    private readonly doc: Document = document,
  ) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    this.doc.addEventListener('visibilitychange', this.onVisibility);
    this.onVisibility();
  }

  stop(): void {
    if (!this.started) return;
    this.started = false;
    this.doc.removeEventListener('visibilitychange', this.onVisibility);
    this.teardown();
  }

  private readonly onVisibility = (): void => {
    if (!this.started) return;
    if (this.doc.visibilityState === 'hidden') {
      this.teardown();
      this.on.status({ kind: 'paused' });
    } else if (this.source === null && this.retryTimer === null) {
      this.failures = 0;
      void this.connect();
    }
  };

  private teardown(): void {
    this.generation += 1;
    this.source?.close();
    this.source = null;
    this.openedAt = null;
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.renewTimer !== null) window.clearTimeout(this.renewTimer);
    this.renewTimer = null;
  }

  private async connect(): Promise<void> {
    const gen = ++this.generation;
    this.on.status({ kind: 'connecting' });
    let ticket: HeldTicket;
    try {
      ticket = await this.usableTicket();
    } catch (e) {
      if (gen !== this.generation) return;
      this.handleTicketError(e, null);
      return;
    }
    if (gen !== this.generation) return;
    const source = new EventSource(streamUrl(ticket.ticket));
    this.source = source;
    source.addEventListener('open', () => {
      if (gen !== this.generation) return;
      this.openedAt = Date.now();
      this.on.status({ kind: 'live' });
    });
    source.addEventListener('state', (m: MessageEvent<string>) => {
      if (gen !== this.generation) return;
      const data = parseJson(m.data);
      if (isSnapshot(data)) this.on.state(data);
    });
    source.addEventListener('event', (m: MessageEvent<string>) => {
      if (gen !== this.generation) return;
      const data = parseJson(m.data);
      if (isAuditEvent(data)) this.on.event(data);
    });
    // The server's last word when the credential behind the stream is revoked or its sign-in
    // expires: stop for good (no reconnect) and sign out.
    source.addEventListener('signed-out', (m: MessageEvent<string>) => {
      if (gen !== this.generation) return;
      this.teardown();
      this.api.credentialEnded(signedOutReason(parseJson(m.data)));
    });
    source.addEventListener('error', () => {
      if (gen !== this.generation) return;
      const connectedFor = this.openedAt === null ? null : Date.now() - this.openedAt;
      this.source?.close();
      this.source = null;
      this.openedAt = null;
      this.scheduleRetry(connectedFor, 'stream interrupted');
    });
  }

  private handleTicketError(e: unknown, connectedFor: number | null): void {
    if (e instanceof UnauthorizedError) {
      // The ApiClient has already signed out; whoever owns this stream stops it.
      return;
    }
    if (e instanceof ForbiddenError) {
      this.on.status({ kind: 'refused', reason: describeError(e) });
      return;
    }
    this.scheduleRetry(connectedFor, describeError(e));
  }

  private scheduleRetry(connectedFor: number | null, reason: string): void {
    const next = afterLoss(this.failures, connectedFor, Math.random());
    this.failures = next.failures;
    const atMs = Date.now() + next.delayMs;
    this.on.status({ kind: 'retrying', atMs, reason });
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = null;
      if (this.started && this.doc.visibilityState !== 'hidden') void this.connect();
    }, next.delayMs);
  }

  /** The held ticket if it is still good for a while, else a new one (which also re-arms renewal). */
  private async usableTicket(): Promise<HeldTicket> {
    if (ticketUsable(this.ticket, Date.now())) return this.ticket;
    return this.renew();
  }

  private async renew(): Promise<HeldTicket> {
    const gen = this.generation;
    const r = await this.api.post<{ ticket: string; expires_in: number }>('/api/auth/ticket');
    const held: HeldTicket = { ticket: r.ticket, expiresInSecs: r.expires_in, obtainedAtMs: Date.now() };
    if (gen === this.generation) {
      this.ticket = held;
      this.armRenewal(held);
    }
    return held;
  }

  private armRenewal(t: HeldTicket): void {
    if (this.renewTimer !== null) window.clearTimeout(this.renewTimer);
    this.renewTimer = window.setTimeout(() => {
      this.renewTimer = null;
      if (!this.started || this.doc.visibilityState === 'hidden') return;
      // A failed renewal is not fatal: the next (re)connect fetches a ticket itself.
      this.renew().catch(() => undefined);
    }, ticketRenewDelayMs(t.expiresInSecs));
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isSnapshot(v: unknown): v is StreamSnapshot {
  if (typeof v !== 'object' || v === null) return false;
  const s = v as Record<string, unknown>;
  return typeof s.pool === 'object' && s.pool !== null && Array.isArray(s.instances);
}

function isAuditEvent(v: unknown): v is AuditEvent {
  if (typeof v !== 'object' || v === null) return false;
  const e = v as Record<string, unknown>;
  return typeof e.id === 'number' && typeof e.type === 'string' && typeof e.message === 'string';
}

/** The text the sign-in screen shows for the stream's `signed-out` event. */
export function signedOutReason(data: unknown): string {
  const reason = typeof data === 'object' && data !== null ? (data as { reason?: unknown }).reason : undefined;
  if (reason === 'revoked') return 'the credential was revoked';
  if (reason === 'expired') return 'your sign-in expired';
  return 'signed out by the server';
}
