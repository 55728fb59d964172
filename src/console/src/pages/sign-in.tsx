import { useState } from 'preact/hooks';
import { ApiError, api, unwrap } from '../api/client.js';
import { setSession } from '../api/session.js';
import { ErrorNotice } from '../components/error-notice.js';
import { chooseTenant } from './tenants.js';

/** E-mail and password for a token (POST /auth/login), then the tenant (one: at once; more: picker). */
export function SignIn({ expired }: { expired: boolean }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const token = await unwrap(api.POST('/api/v1/auth/login', { body: { email, password } }));
      setSession({
        token: token.access_token,
        email,
        expiresAt: Date.now() + token.expires_in * 1000,
      });
      await chooseTenant();
    } catch (failure) {
      setError(failure instanceof ApiError ? failure : undefined);
      if (!(failure instanceof ApiError)) throw failure;
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="narrow">
      <h1>Sign in to kiln</h1>
      {expired && (
        <p class="notice" role="status">
          Your session has ended. Sign in again to go back to where you were.
        </p>
      )}
      <form onSubmit={(event) => void submit(event)} noValidate={false}>
        <label for="email">E-mail</label>
        <input
          id="email"
          type="email"
          autocomplete="username"
          required
          value={email}
          onInput={(event) => setEmail(event.currentTarget.value)}
        />
        <label for="password">Password</label>
        <input
          id="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(event) => setPassword(event.currentTarget.value)}
        />
        {error !== undefined && <ErrorNotice error={error} />}
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
