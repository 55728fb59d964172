import { ownerAndName } from './github.js';

/**
 * Gitea's commit status API, `repoCreateStatus` in its API reference
 * (https://docs.gitea.com/api, repository section): `POST {api}/repos/{owner}/{repo}/statuses/{sha}`
 * with JSON CreateStatusOption `{ state, target_url, description, context }`, `state` one of
 * pending, success, error, failure, warning; answered 201 with the CommitStatus. Tokens go in
 * `Authorization: token …` (https://docs.gitea.com/development/api-usage). Forgejo, a fork, keeps
 * the same endpoint and header (https://forgejo.org/docs/latest/user/api-usage/). There is no
 * running state: a running build is posted as pending, its description says so.
 */
export const gitea = {
  label: 'Gitea',
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
    return { authorization: `token ${token}`, accept: 'application/json', 'user-agent': 'kiln' };
  },

  body(status: { state: string; context: string; targetUrl: string; description: string }) {
    return {
      state: status.state,
      target_url: status.targetUrl,
      description: status.description,
      context: status.context,
    };
  },
} as const;

export const forgejo = { ...gitea, label: 'Forgejo' } as const;
