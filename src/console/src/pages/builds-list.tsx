import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, tenantHeader, unwrap } from '../api/client.js';
import type { components } from '../api/schema.gen.js';
import { ErrorNotice } from '../components/error-notice.js';
import { StatusBadge } from '../components/status-badge.js';
import { buildDuration, shortCommit, when } from '../format.js';
import { link, navigate } from '../router.js';
import { usePoll } from '../poll.js';
import { can } from '../permissions.js';
import { queueLine } from '../queue.js';

const STATUSES = ['queued', 'in_progress', 'success', 'failed', 'cancelled'] as const;
const SORTS = ['created_at', 'updated_at', 'build_number'] as const;
const LIMITS = [20, 50, 100] as const;
const ACTIVE = new Set(['queued', 'in_progress']);

interface ListQuery {
  page: number;
  limit: number;
  status?: (typeof STATUSES)[number] | undefined;
  project_id?: string | undefined;
  sort_by: (typeof SORTS)[number];
  sort_order: 'asc' | 'desc';
}

/** The URL's query as the API's (unknown values fall back to the API's defaults). */
function listQuery(params: URLSearchParams): ListQuery {
  const pick = <T extends string>(values: readonly T[], value: string | null): T | undefined =>
    values.find((v) => v === value);
  const page = Number(params.get('page') ?? '1');
  const limit = Number(params.get('limit') ?? '20');
  const project = params.get('project_id') ?? '';
  return {
    page: Number.isSafeInteger(page) && page >= 1 ? page : 1,
    limit: LIMITS.find((l) => l === limit) ?? 20,
    ...(pick(STATUSES, params.get('status')) && { status: pick(STATUSES, params.get('status'))! }),
    ...(/^[0-9a-f-]{36}$/i.test(project) && { project_id: project }),
    sort_by: pick(SORTS, params.get('sort_by')) ?? 'created_at',
    sort_order: params.get('sort_order') === 'asc' ? 'asc' : 'desc',
  };
}

/** The query as the API takes it: filters that are not set are left out. */
function apiQuery(query: ListQuery) {
  const { status, project_id, ...rest } = query;
  return {
    ...rest,
    ...(status !== undefined && { status }),
    ...(project_id !== undefined && { project_id }),
  };
}

function toSearch(query: ListQuery): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) params.set(key, String(value));
  }
  return `/?${params.toString()}`;
}

/**
 * One page of builds, filtered, sorted and paged exactly as GET /builds offers; the query lives in
 * the URL, so a reload, the back button and a shared link show the same page. While a build on
 * the page is queued or running, the page is fetched again (see poll.ts for how often).
 */
export function BuildsList({ query: params }: { query: URLSearchParams }) {
  const query = listQuery(params);
  const key = toSearch(query);
  const [projects, setProjects] = useState<Project[]>([]);
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    unwrap(api.GET('/api/v1/projects', { params: { header: tenantHeader() } })).then(
      (answer) => setProjects(answer.projects),
      (failure: unknown) => failure instanceof ApiError && setError(failure),
    );
  }, []);
  const list = usePoll(
    key,
    () =>
      unwrap(
        api.GET('/api/v1/builds', { params: { query: apiQuery(query), header: tenantHeader() } }),
      ),
    (answer) => answer.builds.some((build) => ACTIVE.has(build.status)),
  );
  const change = (patch: Partial<ListQuery>) => navigate(toSearch({ ...query, page: 1, ...patch }));
  const projectName = (id: string) => projects.find((p) => p.id === id)?.name ?? id.slice(0, 8);
  const shownError = list.error ?? error;

  return (
    <main id="main">
      <div class="page-head">
        <h1>Builds</h1>
        {can('build:create') && (
          <a class="button" href="/builds/new" onClick={link('/builds/new')}>
            New build
          </a>
        )}
      </div>
      <Filters query={query} projects={projects} change={change} />
      {shownError !== undefined && <ErrorNotice error={shownError} />}
      {list.data !== undefined && (
        <>
          <p class="muted" role="status">
            {list.data.total_count} build{list.data.total_count === 1 ? '' : 's'}
            {list.refreshing ? ' · refreshing while builds are active' : ''}
          </p>
          <BuildsTable builds={list.data.builds} projectName={projectName} />
          <Pager query={query} page={list.data.page} hasMore={list.data.has_more} />
        </>
      )}
    </main>
  );
}

interface Project {
  id: string;
  name: string;
}

type ListedBuild = components['schemas']['BuildDto'];

/** Status, project, sort and page size: each change goes to the URL, back on page 1. */
function Filters({
  query,
  projects,
  change,
}: {
  query: ListQuery;
  projects: readonly Project[];
  change: (patch: Partial<ListQuery>) => void;
}) {
  return (
    <form class="filters" onSubmit={(event) => event.preventDefault()}>
      <label>
        Status
        <select
          value={query.status ?? ''}
          onChange={(event) => {
            const status = STATUSES.find((s) => s === event.currentTarget.value);
            change({ status });
          }}
        >
          <option value="">any</option>
          {STATUSES.map((status) => (
            <option key={status} value={status}>
              {status.replace('_', ' ')}
            </option>
          ))}
        </select>
      </label>
      <label>
        Project
        <select
          value={query.project_id ?? ''}
          onChange={(event) => change({ project_id: event.currentTarget.value || undefined })}
        >
          <option value="">any</option>
          {projects.map((project) => (
            <option key={project.id} value={project.id}>
              {project.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Sort by
        <select
          value={query.sort_by}
          onChange={(event) =>
            change({
              sort_by: SORTS.find((s) => s === event.currentTarget.value) ?? 'created_at',
            })
          }
        >
          <option value="created_at">created</option>
          <option value="updated_at">updated</option>
          <option value="build_number">number</option>
        </select>
      </label>
      <label>
        Order
        <select
          value={query.sort_order}
          onChange={(event) =>
            change({ sort_order: event.currentTarget.value === 'asc' ? 'asc' : 'desc' })
          }
        >
          <option value="desc">newest first</option>
          <option value="asc">oldest first</option>
        </select>
      </label>
      <label>
        Per page
        <select
          value={String(query.limit)}
          onChange={(event) => change({ limit: Number(event.currentTarget.value) })}
        >
          {LIMITS.map((limit) => (
            <option key={limit} value={String(limit)}>
              {limit}
            </option>
          ))}
        </select>
      </label>
    </form>
  );
}

/** The page's builds, one row each; the first cell links to the build. */
function BuildsTable({
  builds,
  projectName,
}: {
  builds: readonly ListedBuild[];
  projectName: (id: string) => string;
}) {
  return (
    <div class="table-wrap">
      <table class="builds">
        <thead>
          <tr>
            <th scope="col">Build</th>
            <th scope="col">Status</th>
            <th scope="col">Branch</th>
            <th scope="col">Commit</th>
            <th scope="col">Author</th>
            <th scope="col">Created</th>
            <th scope="col">Duration</th>
          </tr>
        </thead>
        <tbody>
          {builds.map((build) => (
            <tr key={build.id}>
              <td>
                <a href={`/builds/${build.id}`} onClick={link(`/builds/${build.id}`)}>
                  {projectName(build.project_id)} #{build.build_number}
                </a>
              </td>
              <td>
                <StatusBadge status={build.status} />
                {build.queue && (
                  <>
                    {' '}
                    <span class="queue-line">{queueLine(build.queue)}</span>
                  </>
                )}
              </td>
              <td>{build.git_branch ?? ''}</td>
              <td>
                <code>{shortCommit(build.git_commit)}</code>
              </td>
              <td>{build.git_author_name ?? ''}</td>
              <td>{when(build.created_at)}</td>
              <td>{buildDuration(build) ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Previous and next page (the filters and sort kept); `page` is the one the server answered. */
function Pager({ query, page, hasMore }: { query: ListQuery; page: number; hasMore: boolean }) {
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        disabled={query.page <= 1}
        onClick={() => navigate(toSearch({ ...query, page: query.page - 1 }))}
      >
        Previous
      </button>
      <span>Page {page}</span>
      <button
        type="button"
        disabled={!hasMore}
        onClick={() => navigate(toSearch({ ...query, page: query.page + 1 }))}
      >
        Next
      </button>
    </nav>
  );
}
