import { useState, type FormEvent } from 'react';
import { describeError } from '../logic/api-errors.js';
import { isLoginResult, type StoredCredential } from '../logic/stored-credential.js';

interface SignInProps {
  defaultUser: string;
  /** Why the user sees this screen again (expired, revoked), if it was not by choice. */
  notice: string | null;
  onSignedIn(credential: StoredCredential): void;
}

export function SignIn({ defaultUser, notice, onSignedIn }: SignInProps) {
  const [user, setUser] = useState(defaultUser);
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: FormEvent): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch('/api/auth/login', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ user, password }),
        cache: 'no-store',
      });
      if (res.status === 429) {
        const after = res.headers.get('Retry-After');
        throw new Error(`Too many failed sign-ins. Try again${after ? ` in ${after} s` : ' later'}.`);
      }
      if (res.status === 401) throw new Error('Wrong user or password.');
      if (!res.ok) throw new Error(`Sign-in failed (${res.status}): ${(await res.text()).trim()}`);
      const body: unknown = await res.json();
      if (!isLoginResult(body)) throw new Error('Sign-in answered with an unexpected body.');
      setPassword('');
      onSignedIn({ token: body.token, expires: body.expires, user: body.user });
    } catch (err) {
      setError(err instanceof TypeError ? 'The service is not answering.' : describeError(err));
      setBusy(false);
    }
  };

  return (
    <main className="signin">
      <form className="signin-card" onSubmit={(e) => void submit(e)} aria-labelledby="signin-title">
        <h1 id="signin-title" className="brand">
          <span className="brand-mark" aria-hidden="true" />
          exitpool
        </h1>
        <p className="muted">Sign in to the dashboard.</p>
        {notice !== null && (
          <p className="notice-text" role="status">
            {notice}
          </p>
        )}
        <label className="field">
          <span>User</span>
          <input name="user" autoComplete="username" value={user} onChange={(e) => setUser(e.target.value)} required />
        </label>
        <label className="field">
          <span>Password</span>
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            required
            autoFocus
          />
        </label>
        {error !== null && (
          <p className="error-text" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p className="muted small">The first boot prints a generated password to the container log once.</p>
      </form>
    </main>
  );
}
