/**
 * The calls a session makes on the pool's API with its proxy token (docs/api.md, "Sessions").
 * fetch follows an API's redirects only within its origin with the token: the Fetch standard
 * drops `Authorization` on a redirect to another origin, and undici keeps to it (tested in
 * test/unit/client-node-safety.test.ts).
 */
import { fetch as undiciFetch } from 'undici';
import { ExitpoolApiError, type RefusalReason } from './errors.js';
import type { FailureKind } from './failure-kind.js';

/** How long one API call may take: a rotation waits up to the service's FRESH_EXIT_WAIT_MS for a fresh exit. */
export const API_TIMEOUT_MS = 30_000;

/** `POST /api/sessions/{key}/failure`'s answer; `moved` and the exit fields come from services that move a reported session themselves. */
export interface FailureAnswer {
  session: string;
  instance: number;
  kind: string;
  scored: boolean;
  /** true: the pool already moved the session off the reported exit (do not rotate it again). */
  moved?: boolean;
  exit_ip?: string;
  /** Whether the session's exit now is outside its recent exits. */
  new_exit?: boolean;
  /** Why new_exit is false. */
  exit_note?: string;
}

/** `POST /api/sessions/{key}/rotate`'s answer. */
export interface RotateAnswer {
  session: string;
  instance: number;
  exit_ip: string;
  exit_confirmed: boolean;
  new_exit: boolean;
  exit_note: string;
}

/** `GET /api/sessions/{key}/refusal`'s answer. */
export interface RefusalAnswer {
  session: string;
  refusal: null | {
    reason: RefusalReason;
    detail: string;
    at: string;
    age_ms: number;
    http_status: number;
    proxy_status_error: string;
    socks_reply: number;
  };
}

export interface FailureReportBody {
  kind: FailureKind;
  reason: string;
  domain?: string;
}

export class ExitpoolApi {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  report(key: string, body: FailureReportBody): Promise<FailureAnswer> {
    return this.call('POST', `/api/sessions/${encodeURIComponent(key)}/failure`, body) as Promise<FailureAnswer>;
  }

  rotate(key: string): Promise<RotateAnswer> {
    return this.call('POST', `/api/sessions/${encodeURIComponent(key)}/rotate`) as Promise<RotateAnswer>;
  }

  session(key: string): Promise<{ exit_ip: string }> {
    return this.call('GET', `/api/sessions/${encodeURIComponent(key)}`) as Promise<{ exit_ip: string }>;
  }

  refusal(key: string): Promise<RefusalAnswer> {
    return this.call('GET', `/api/sessions/${encodeURIComponent(key)}/refusal`) as Promise<RefusalAnswer>;
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await undiciFetch(new URL(path, this.base), {
      method,
      headers: { Authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(API_TIMEOUT_MS),
    });
    const text = await response.text();
    if (!response.ok) throw new ExitpoolApiError(response.status, text);
    return text === '' ? null : (JSON.parse(text) as unknown);
  }
}
