import { useEffect, useState } from 'preact/hooks';
import './expiry.js';
import { type Session, onSessionChange, session, setSession } from './api/session.js';
import { BuildsList } from './pages/builds-list.js';
import { SignIn } from './pages/sign-in.js';
import { BuildPage } from './pages/build.js';
import { NewBuild } from './pages/new-build/new-build.js';
import { can } from './permissions.js';
import { Tenants, rememberReturn } from './pages/tenants.js';
import { Members } from './pages/admin/members.js';
import { Projects } from './pages/admin/projects.js';
import { ProjectTriggers } from './pages/admin/triggers.js';
import { Settings } from './pages/admin/settings.js';
import { Tokens } from './pages/admin/tokens.js';
import { type Route, here, link, navigate, parseRoute, useRoute } from './router.js';

function useSession(): Session | undefined {
  const [current, setCurrent] = useState(session);
  useEffect(() => onSessionChange(setCurrent), []);
  return current;
}

/** Where a page must send the user first: to sign in, to pick a tenant, or nowhere. */
function redirectFor(
  page: Route['page'],
  current: Session | undefined,
): 'sign-in' | 'tenants' | undefined {
  if (page === 'sign-in') return undefined;
  if (current === undefined) return 'sign-in';
  if (current.tenantId === undefined && page !== 'tenants') return 'tenants';
  return undefined;
}

export function App() {
  const route = useRoute();
  const current = useSession();

  // Pages need a session, and all but the picker a tenant. On the sign-in page the sign-in itself
  // decides where to go (the picker, or back where the user was).
  const needsSignIn = redirectFor(route.page, current) === 'sign-in';
  const needsTenant = redirectFor(route.page, current) === 'tenants';
  useEffect(() => {
    // Effects run after paint, when the sign-in may have moved on: decide on what holds now.
    const now = redirectFor(parseRoute(location).page, session());
    if (now === 'sign-in') {
      rememberReturn(here());
      navigate('/sign-in', true);
    } else if (now === 'tenants') navigate('/tenants', true);
  }, [needsSignIn, needsTenant]);
  if (needsSignIn || needsTenant) return null;

  if (route.page === 'sign-in') {
    return <SignIn expired={new URLSearchParams(location.search).has('expired')} />;
  }
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header session={current!} page={route.page} />
      {route.page === 'tenants' && <Tenants />}
      {route.page === 'builds' && <BuildsList query={route.query} />}
      {route.page === 'build' && <BuildPage id={route.id} />}
      {route.page === 'new-build' && <NewBuild />}
      {route.page === 'members' && <Members />}
      {route.page === 'projects' && <Projects />}
      {route.page === 'project-triggers' && <ProjectTriggers projectId={route.id} />}
      {route.page === 'settings' && <Settings />}
      {route.page === 'tokens' && <Tokens />}
    </>
  );
}

/** Pages under a header page, which the header marks as current while they are shown. */
const UNDER: Partial<Record<Route['page'], Route['page']>> = { 'project-triggers': 'projects' };

/** The header's pages, each shown only to roles holding its permission (undefined: everyone). */
const NAV: ReadonlyArray<{
  readonly href: string;
  readonly label: string;
  readonly page: Route['page'];
  readonly permission?: string;
}> = [
  { href: '/', label: 'Builds', page: 'builds' },
  { href: '/builds/new', label: 'New build', page: 'new-build', permission: 'build:create' },
  { href: '/members', label: 'Members', page: 'members', permission: 'member:manage' },
  { href: '/projects', label: 'Projects', page: 'projects', permission: 'project:manage' },
  { href: '/settings', label: 'Settings', page: 'settings', permission: 'settings:manage' },
  { href: '/tokens', label: 'Tokens', page: 'tokens', permission: 'token:manage' },
];

function Header({ session: current, page }: { session: Session; page: Route['page'] }) {
  return (
    <header class="top">
      <nav aria-label="Main">
        <a class="brand" href="/" onClick={link('/')}>
          kiln
        </a>
        {NAV.filter((entry) => entry.permission === undefined || can(entry.permission)).map(
          (entry) => (
            <a
              key={entry.href}
              href={entry.href}
              onClick={link(entry.href)}
              aria-current={entry.page === (UNDER[page] ?? page) ? 'page' : undefined}
            >
              {entry.label}
            </a>
          ),
        )}
      </nav>
      <div class="who">
        {current.tenantName !== undefined && (
          <a href="/tenants" onClick={link('/tenants')} title="Switch tenant">
            {current.tenantName} ({current.role})
          </a>
        )}
        <span class="muted">{current.email}</span>
        <button
          type="button"
          onClick={() => {
            setSession(undefined);
            navigate('/sign-in', true);
          }}
        >
          Sign out
        </button>
      </div>
    </header>
  );
}
