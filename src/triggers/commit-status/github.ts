import type { IncomingHttpHeaders } from 'node:http';

/**
 * GitHub's commit status API, "Create a commit status"
 * (https://docs.github.com/en/rest/commits/statuses#create-a-commit-status):
 * `POST {api}/repos/{owner}/{repo}/statuses/{sha}` with JSON `{ state, target_url, description,
 * context }`, `state` one of error, failure, pending, success; answered 201 with the status.
 * GitHub has no running state: a running build is posted as pending, its description says so.
 * Rate limits (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api)
 * answer 403 or 429 with `x-ratelimit-remaining: 0` or `retry-after`: a 403 so marked is a pause,
 * not a refusal.
 */
export const github = {
  label: 'GitHub',
  repositoryForm: 'owner/name',
  states: {
    pending: 'pending',
    running: 'pending',
    success: 'success',
    failure: 'failure',
    error: 'error',
  },

  /** Null when `repository` is not `owner/name`. */
  path(repository: string, sha: string): string | null {
    return ownerAndName(repository, sha);
  },

  headers(token: string): Record<string, string> {
    return {
      authorization: `Bearer ${token}`,
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      'user-agent': 'kiln',
    };
  },

  body(status: { state: string; context: string; targetUrl: string; description: string }) {
    return {
      state: status.state,
      target_url: status.targetUrl,
      description: status.description,
      context: status.context,
    };
  },

  rateLimited(statusCode: number, headers: IncomingHttpHeaders): boolean {
    return (
      statusCode === 403 &&
      (headers['x-ratelimit-remaining'] === '0' || headers['retry-after'] !== undefined)
    );
  },
} as const;

/**
 * `/repos/{owner}/{name}/statuses/{sha}`, each part encoded; null unless `repository` is exactly
 * `owner/name` (Gitea and Forgejo use the same path).
 */
export function ownerAndName(repository: string, sha: string): string | null {
  const parts = repository.split('/');
  if (parts.length !== 2 || parts.some((part) => part.trim() === '')) return null;
  const [owner, name] = parts.map((part) => encodeURIComponent(part.trim())) as [string, string];
  return `/repos/${owner}/${name}/statuses/${encodeURIComponent(sha)}`;
}
