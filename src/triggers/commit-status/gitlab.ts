/**
 * GitLab's commit status API, "Set the pipeline status of a commit"
 * (https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit):
 * `POST {api}/projects/{id}/statuses/{sha}`, `id` the numeric id or the URL-encoded path of the
 * project, with `state` (pending, running, success, failed, canceled), `name` (or `context`),
 * `target_url` and `description`, authenticated by a `PRIVATE-TOKEN` header; answered 201.
 *
 * GitLab keeps a pending or running status and moves it through a state machine, which refuses a
 * move to the state it is already in: 400 `Cannot transition status via :run from :running`. For
 * kiln that answer means the post it repeats (after a timeout that hid a success) is already
 * there.
 */
export const gitlab = {
  label: 'GitLab',
  repositoryForm: 'a project path or numeric id',
  states: {
    pending: 'pending',
    running: 'running',
    success: 'success',
    failure: 'failed',
    error: 'canceled',
  },

  /** Null for an empty project. */
  path(repository: string, sha: string): string | null {
    const project = repository.trim();
    if (project === '') return null;
    return `/projects/${encodeURIComponent(project)}/statuses/${encodeURIComponent(sha)}`;
  },

  headers(token: string): Record<string, string> {
    return { 'private-token': token, accept: 'application/json', 'user-agent': 'kiln' };
  },

  body(status: { state: string; context: string; targetUrl: string; description: string }) {
    return {
      state: status.state,
      name: status.context,
      target_url: status.targetUrl,
      description: status.description,
    };
  },

  alreadyPosted(statusCode: number, reason: string, state: string): boolean {
    if (statusCode !== 400) return false;
    const current = /Cannot transition status via :\w+ from :(\w+)/.exec(reason)?.[1];
    return current === state;
  },
} as const;
