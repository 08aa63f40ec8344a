import { NetworkError, UnauthorizedError, errorForStatus } from '../logic/api-errors.js';

/**
 * The one way the dashboard calls the API. It adds the credential, turns non-2xx answers into
 * typed errors, and reports every 401 to `onUnauthorized` (which signs out) before throwing.
 */
export class ApiClient {
  constructor(
    /** The sign-in credential, or null (under AUTH_DISABLED none is needed). */
    private readonly credential: () => string | null,
    private readonly onUnauthorized: (reason: string) => void,
    /** The live stream's `signed-out` event: the server ended the credential behind it. */
    private readonly onCredentialEnded: (reason: string) => void = onUnauthorized,
  ) {}

  async request<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    const token = this.credential();
    if (token !== null) headers.Authorization = `Bearer ${token}`;
    const init: RequestInit = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    if (signal !== undefined) init.signal = signal;
    let res: Response;
    try {
      res = await fetch(path, init);
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw new NetworkError('the service is not answering');
    }
    if (!res.ok) {
      const error = errorForStatus(res.status, await res.text().catch(() => ''));
      if (error instanceof UnauthorizedError) this.onUnauthorized(error.message);
      throw error;
    }
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  /** The server ended the credential (the stream said so): sign out as after a 401. */
  credentialEnded(reason: string): void {
    this.onCredentialEnded(reason);
  }

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.request<T>('GET', path, undefined, signal);
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  delete(path: string): Promise<void> {
    return this.request<void>('DELETE', path);
  }
}
