import { useEffect, useState } from 'preact/hooks';

/** The tenant admin pages, each at /<page> (pages/admin/). */
const ADMIN_PAGES = ['members', 'projects', 'settings', 'tokens'] as const;

/** The console's pages, by path. Unknown paths show the builds list. */
export type Route =
  | { readonly page: 'sign-in' }
  | { readonly page: 'tenants' }
  | { readonly page: 'builds'; readonly query: URLSearchParams }
  | { readonly page: 'build'; readonly id: string }
  | { readonly page: 'new-build' }
  | { readonly page: (typeof ADMIN_PAGES)[number] }
  | { readonly page: 'project-triggers'; readonly id: string };

export function parseRoute(location: { pathname: string; search: string }): Route {
  const path = location.pathname.replace(/\/+$/, '') || '/';
  if (path === '/sign-in') return { page: 'sign-in' };
  if (path === '/tenants') return { page: 'tenants' };
  if (path === '/builds/new') return { page: 'new-build' };
  const admin = ADMIN_PAGES.find((page) => path === `/${page}`);
  if (admin !== undefined) return { page: admin };
  const triggers = /^\/projects\/([0-9a-f-]{36})\/triggers$/i.exec(path);
  if (triggers !== null) return { page: 'project-triggers', id: triggers[1]! };
  const build = /^\/builds\/([0-9a-f-]{36})$/i.exec(path);
  if (build !== null) return { page: 'build', id: build[1]! };
  return { page: 'builds', query: new URLSearchParams(location.search) };
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

/** Goes to `href` (same origin) without reloading; `replace` keeps it out of the history. */
export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  for (const listener of listeners) listener();
}

/** The current route, re-rendering on navigation. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location));
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return route;
}

/** The path and query to come back to after signing in again. */
export function here(): string {
  return `${location.pathname}${location.search}`;
}

/** A same-origin link that navigates without reloading (modifier clicks open a tab as usual). */
export function link(href: string) {
  return (event: MouseEvent) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
      return;
    event.preventDefault();
    navigate(href);
  };
}
