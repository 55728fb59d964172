import { whenSessionExpires } from './api/client.js';
import { session, setSession } from './api/session.js';
import { rememberReturn, rememberTenant } from './pages/tenants.js';
import { here, navigate } from './router.js';

/**
 * The API refused the token (401, or the log socket closed with 1008): it ran out or was revoked.
 * The page's path and query and the tenant are remembered and signing in again comes back to
 * them (a form keeps its own draft in sessionStorage).
 */
export function expireSession(): void {
  const current = session();
  if (current === undefined) return;
  rememberReturn(here());
  rememberTenant(current.tenantId);
  setSession(undefined);
  navigate('/sign-in?expired=1', true);
}

whenSessionExpires(expireSession);
