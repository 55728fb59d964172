import { useEffect, useState } from 'preact/hooks';
import './expiry.js';
import { type Session, onSessionChange, session, setSession } from './api/session.js';
import { BuildsList } from './pages/builds-list.js';
import { SignIn } from './pages/sign-in.js';
import { BuildPage } from './pages/build.js';
import { NewBuild } from './pages/new-build/new-build.js';
import { can } from './permissions.js';
import { Tenants, rememberReturn } from './pages/tenants.js';
import { here, link, navigate, useRoute } from './router.js';

function useSession(): Session | undefined {
  const [current, setCurrent] = useState(session);
  useEffect(() => onSessionChange(setCurrent), []);
  return current;
}

export function App() {
  const route = useRoute();
  const current = useSession();

  // Pages need a session, and all but the picker a tenant.
  const needsSignIn = current === undefined && route.page !== 'sign-in';
  const needsTenant =
    current !== undefined && current.tenantId === undefined && route.page !== 'tenants';
  useEffect(() => {
    if (needsSignIn) {
      rememberReturn(here());
      navigate('/sign-in', true);
    } else if (needsTenant) navigate('/tenants', true);
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
      <Header session={current!} />
      {route.page === 'tenants' && <Tenants />}
      {route.page === 'builds' && <BuildsList query={route.query} />}
      {route.page === 'build' && <BuildPage id={route.id} />}
      {route.page === 'new-build' && <NewBuild />}
    </>
  );
}

function Header({ session: current }: { session: Session }) {
  return (
    <header class="top">
      <nav aria-label="Main">
        <a class="brand" href="/" onClick={link('/')}>
          kiln
        </a>
        <a href="/" onClick={link('/')}>
          Builds
        </a>
        {can('build:create') && (
          <a href="/builds/new" onClick={link('/builds/new')}>
            New build
          </a>
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
