/**
 * Who is signed in, kept in this tab only: in memory, and in sessionStorage so a reload keeps the
 * session (docs/adr/0028-web-console.md). Never a cookie (no request carries it by itself, so no
 * other site can make the browser use it) and never localStorage (it would outlive the tab and be
 * shared by every tab). The token is handed to fetch and the WebSocket explicitly.
 */
export interface Session {
  readonly token: string;
  readonly email: string;
  /** When the token stops being accepted (epoch ms), from the login answer. */
  readonly expiresAt: number;
  /** The tenant requests are scoped to (X-Tenant-ID); undefined until picked. */
  readonly tenantId?: string;
  readonly tenantName?: string;
  readonly role?: string;
  /** What the role allows there (from GET /auth/tenants): which actions the console shows. */
  readonly permissions?: readonly string[];
}

const KEY = 'kiln.session';
let current: Session | undefined = read();
const listeners = new Set<(session: Session | undefined) => void>();

function read(): Session | undefined {
  try {
    const text = sessionStorage.getItem(KEY);
    if (text === null) return undefined;
    const session = JSON.parse(text) as Session;
    return session.expiresAt > Date.now() ? session : undefined;
  } catch {
    return undefined; // storage disabled or garbled: sign in again
  }
}

export function session(): Session | undefined {
  return current;
}

export function setSession(next: Session | undefined): void {
  current = next;
  try {
    if (next === undefined) sessionStorage.removeItem(KEY);
    else sessionStorage.setItem(KEY, JSON.stringify(next));
  } catch {
    // Storage refused (private mode, quota): the session lives in memory for this page only.
  }
  for (const listener of listeners) listener(next);
}

export function onSessionChange(listener: (session: Session | undefined) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
