/**
 * Stream tickets live 60 seconds (TICKET_TTL_MS). The dashboard keeps one that is
 * always usable: it renews well before expiry, so a reconnect never has to present a ticket
 * that expires while the request is in flight.
 */
export interface HeldTicket {
  ticket: string;
  /** When the ticket was received, ms since the epoch (client clock). */
  obtainedAtMs: number;
  /** Lifetime the server announced (expires_in), seconds. */
  expiresInSecs: number;
}

/** A ticket this close to expiry is not presented any more. */
export const TICKET_SAFETY_MARGIN_MS = 10_000;

/** Renew at three quarters of the lifetime, and never later than the safety margin allows. */
export function ticketRenewDelayMs(expiresInSecs: number): number {
  const lifetime = Math.max(0, expiresInSecs * 1000);
  const byFraction = lifetime * 0.75;
  const byMargin = lifetime - TICKET_SAFETY_MARGIN_MS;
  return Math.max(1_000, Math.min(byFraction, byMargin));
}

export function ticketExpiresAtMs(t: HeldTicket): number {
  return t.obtainedAtMs + t.expiresInSecs * 1000;
}

/** Whether `t` may still be presented at `nowMs`. */
export function ticketUsable(t: HeldTicket | null, nowMs: number): t is HeldTicket {
  return t !== null && ticketExpiresAtMs(t) - TICKET_SAFETY_MARGIN_MS > nowMs;
}

/** The URL of the stream for a ticket (it travels in the query: EventSource cannot send headers). */
export function streamUrl(ticket: string): string {
  return `/api/stream?ticket=${encodeURIComponent(ticket)}`;
}
