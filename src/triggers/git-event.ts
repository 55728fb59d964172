/** What a trigger reacts to: the same for every provider, and for polling. */
export type GitEventKind = 'push' | 'tag' | 'pull_request' | 'ping';

/**
 * A git event as kiln understands it, read from a provider's webhook payload (providers/) or made
 * by polling. A provider's own vocabulary stays behind it: only `pullRequest.action` keeps the
 * provider's word, so the filter can say which action it refused.
 */
export interface GitEvent {
  readonly kind: GitEventKind;
  /** Full ref: refs/heads/main, refs/tags/v1, refs/pull/7/head. */
  readonly ref: string | null;
  /** 'main' for a push; the PR's head branch for a PR. */
  readonly branch: string | null;
  /** 'v1' for a tag push. */
  readonly tag: string | null;
  /** 40-hex sha to build (after-sha, PR head sha); null for a branch deletion. */
  readonly commit: string | null;
  /** A branch/tag deletion (never built). */
  readonly deleted: boolean;
  /** Login/username of who pushed (PR: who opened/synchronized). */
  readonly pusher: string | null;
  /** The head commit's author. */
  readonly author: { readonly name: string; readonly email: string } | null;
  /** Union of added/modified/removed of all commits; null = unknown (payload lists none / too many). */
  readonly changedFiles: readonly string[] | null;
  readonly pullRequest: {
    readonly number: number;
    readonly action: string;
    readonly targetBranch: string;
  } | null;
  /** Clone URL from the payload (informational). */
  readonly repositoryUrl: string | null;
}
