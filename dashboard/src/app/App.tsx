import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { ApiClient } from '../api/client.js';
import { clearCredential, loadCredential, saveCredential } from '../auth/credential-storage.js';
import { SignIn } from '../auth/SignIn.js';
import { describeError } from '../logic/api-errors.js';
import { reconnectDelayMs } from '../logic/backoff.js';
import { msUntilExpiry, type StoredCredential } from '../logic/stored-credential.js';
import { Shell } from './Shell.js';

type AuthPhase =
  | { phase: 'checking' }
  | { phase: 'unreachable'; message: string }
  | { phase: 'signed-out'; user: string; message: string | null }
  | { phase: 'signed-in'; credential: StoredCredential }
  | { phase: 'disabled'; user: string };

interface AuthStatus {
  required: boolean;
  user: string;
}

/** Longest delay setTimeout honours; a longer sign-out timer is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Decides between the sign-in screen and the dashboard. GET /api/auth/status says whether a
 * sign-in is required; the credential lives in sessionStorage (per tab). Sign-out is
 * client-side (there is no server-side sign-out): forgetting the credential. Any 401 signs out.
 */
export function App() {
  const [auth, setAuth] = useState<AuthPhase>({ phase: 'checking' });
  const [checkAttempt, setCheckAttempt] = useState(0);
  const credentialRef = useRef<string | null>(null);
  credentialRef.current = auth.phase === 'signed-in' ? auth.credential.token : null;

  useEffect(() => {
    if (auth.phase !== 'checking') return;
    let cancelled = false;
    const check = async (): Promise<void> => {
      try {
        const res = await fetch('/api/auth/status', { cache: 'no-store', headers: { Accept: 'application/json' } });
        if (!res.ok) throw new Error(`status check answered ${res.status}`);
        const status = (await res.json()) as AuthStatus;
        if (cancelled) return;
        if (!status.required) {
          setAuth({ phase: 'disabled', user: status.user });
          return;
        }
        const stored = loadCredential();
        setAuth(stored !== null ? { phase: 'signed-in', credential: stored } : { phase: 'signed-out', user: status.user, message: null });
      } catch (e) {
        if (cancelled) return;
        setAuth({ phase: 'unreachable', message: describeError(e) });
      }
    };
    void check();
    return () => {
      cancelled = true;
    };
  }, [auth.phase, checkAttempt]);

  // An unreachable service is retried with backoff (only while the tab is visible).
  useEffect(() => {
    if (auth.phase !== 'unreachable') return;
    const t = window.setTimeout(() => {
      if (document.visibilityState !== 'hidden') {
        setCheckAttempt((n) => n + 1);
        setAuth({ phase: 'checking' });
      }
    }, reconnectDelayMs(Math.min(checkAttempt, 4), Math.random()));
    return () => window.clearTimeout(t);
  }, [auth.phase, checkAttempt]);

  const signOut = useCallback((message: string | null) => {
    clearCredential();
    setAuth((a) => {
      if (a.phase === 'disabled') return { phase: 'checking' };
      const user = a.phase === 'signed-in' ? a.credential.user : a.phase === 'signed-out' ? a.user : 'admin';
      return { phase: 'signed-out', user, message };
    });
  }, []);

  // A session credential is valid until `expires`; sign out then rather than on the next 401.
  useEffect(() => {
    if (auth.phase !== 'signed-in') return;
    const left = msUntilExpiry(auth.credential, Date.now());
    const t = window.setTimeout(() => {
      if (msUntilExpiry(auth.credential, Date.now()) <= 0) signOut('Your sign-in expired. Sign in again.');
      else setAuth({ phase: 'signed-in', credential: { ...auth.credential } });
    }, Math.min(left, MAX_TIMER_MS));
    return () => window.clearTimeout(t);
  }, [auth, signOut]);

  // One client per sign-in: a new credential gets a new client, so the stream restarts with it.
  const clientKey = auth.phase === 'signed-in' ? auth.credential.token : auth.phase;
  const api = useMemo(
    () =>
      new ApiClient(
        () => credentialRef.current,
        () => signOut('Your sign-in is no longer valid (expired, or the service was reconfigured). Sign in again.'),
        (reason) => signOut(`Signed out by the service: ${reason}. Sign in again.`),
      ),
    [clientKey, signOut],
  );

  switch (auth.phase) {
    case 'checking':
      return <Splash text="Connecting to exitpool…" />;
    case 'unreachable':
      return (
        <Splash text={`The service is not answering (${auth.message}). Retrying…`}>
          <button type="button" className="btn" onClick={() => setAuth({ phase: 'checking' })}>
            Retry now
          </button>
        </Splash>
      );
    case 'signed-out':
      return (
        <SignIn
          defaultUser={auth.user}
          notice={auth.message}
          onSignedIn={(credential) => {
            saveCredential(credential);
            setAuth({ phase: 'signed-in', credential });
          }}
        />
      );
    case 'signed-in':
      return <Shell api={api} user={auth.credential.user} authDisabled={false} onSignOut={() => signOut(null)} />;
    case 'disabled':
      return <Shell api={api} user={auth.user} authDisabled onSignOut={() => undefined} />;
  }
}

function Splash({ text, children }: { text: string; children?: ReactNode }) {
  return (
    <main className="splash">
      <p role="status">{text}</p>
      {children}
    </main>
  );
}
