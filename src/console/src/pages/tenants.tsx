import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, unwrap } from '../api/client.js';
import { session, setSession } from '../api/session.js';
import { ErrorNotice } from '../components/error-notice.js';
import { navigate } from '../router.js';

export interface Membership {
  readonly id: string;
  readonly name: string;
  readonly role: string;
  readonly permissions: readonly string[];
}

const RETURN_KEY = 'kiln.returnTo';
const TENANT_KEY = 'kiln.previousTenant';

/** Remembers where to come back to after signing in again (the page's path and query). */
export function rememberReturn(path: string): void {
  sessionStorage.setItem(RETURN_KEY, path);
}

function takeReturn(): string {
  const path = sessionStorage.getItem(RETURN_KEY) ?? '/';
  sessionStorage.removeItem(RETURN_KEY);
  return path.startsWith('/') && !path.startsWith('//') ? path : '/';
}

/** Remembers the tenant of a session that ended, to pick it again when the user signs back in. */
export function rememberTenant(tenantId: string | undefined): void {
  if (tenantId === undefined) sessionStorage.removeItem(TENANT_KEY);
  else sessionStorage.setItem(TENANT_KEY, tenantId);
}

async function memberships(): Promise<Membership[]> {
  return (await unwrap(api.GET('/api/v1/auth/tenants'))).tenants;
}

/** Puts the tenant in the session and goes on to where the user was going. */
function enter(tenant: Membership): void {
  const current = session();
  if (current === undefined) return;
  setSession({
    ...current,
    tenantId: tenant.id,
    tenantName: tenant.name,
    role: tenant.role,
    permissions: tenant.permissions,
  });
  navigate(takeReturn(), true);
}

/**
 * After signing in: the same tenant as before the session ended if the user is still its member,
 * else the only one, else the picker.
 */
export async function chooseTenant(): Promise<void> {
  const tenants = await memberships();
  const previous = sessionStorage.getItem(TENANT_KEY);
  sessionStorage.removeItem(TENANT_KEY);
  const again = tenants.find((t) => t.id === previous);
  if (again !== undefined) enter(again);
  else if (tenants.length === 1) enter(tenants[0]!);
  else navigate('/tenants', true);
}

/**
 * Reads the user's own membership again after it changed (a new role, or none): the session
 * takes the new role's permissions, or the picker opens when the user left the tenant.
 */
export async function refreshMembership(): Promise<void> {
  const current = session();
  if (current?.tenantId === undefined) return;
  const tenant = (await memberships()).find((t) => t.id === current.tenantId);
  if (tenant !== undefined) {
    setSession({ ...current, role: tenant.role, permissions: tenant.permissions });
    return;
  }
  setSession({ token: current.token, email: current.email, expiresAt: current.expiresAt });
  navigate('/tenants', true);
}

/** The tenants the user is a member of, with their role; one click scopes the console to it. */
export function Tenants() {
  const [tenants, setTenants] = useState<Membership[] | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    memberships().then(setTenants, (failure: unknown) => {
      if (failure instanceof ApiError) setError(failure);
      else throw failure;
    });
  }, []);

  return (
    <main id="main" class="narrow">
      <h1>Choose a tenant</h1>
      {error !== undefined && <ErrorNotice error={error} />}
      {tenants?.length === 0 && (
        <p>You are not a member of any tenant yet. Ask an administrator to add you.</p>
      )}
      <ul class="choices">
        {tenants?.map((tenant) => (
          <li key={tenant.id}>
            <button type="button" onClick={() => enter(tenant)}>
              <strong>{tenant.name}</strong> <span class="muted">as {tenant.role}</span>
            </button>
          </li>
        ))}
      </ul>
    </main>
  );
}
