import picomatch from 'picomatch';
import type { GitEvent } from './git-event.js';

/** What of a trigger decides whether an event builds. */
export interface TriggerFilter {
  /** Subset of 'push', 'tag', 'pull_request'. */
  readonly events: readonly string[];
  /** Globs over branch names; a pull request is matched by its target branch. */
  readonly branches: readonly string[];
  /** Globs over tag names. */
  readonly tags: readonly string[];
  /** Globs over changed files; [] = any. */
  readonly paths: readonly string[];
}

/**
 * Whether to build, and why not: `why` (and `detail`, said of a build that goes ahead on less
 * than the filter asked for) are sentences shown in a trigger's list of deliveries.
 */
export type Decision =
  | { readonly build: true; readonly detail?: string }
  | { readonly build: false; readonly why: string };

/**
 * The pull request actions that build: GitHub's opened/synchronize/reopened, GitLab's
 * open/update/reopen (update with new commits only: see providers/gitlab.ts), Gitea's
 * opened/synchronized/reopened.
 */
const BUILDING_ACTIONS: ReadonlySet<string> = new Set([
  'opened',
  'synchronize',
  'synchronized',
  'reopened',
  'open',
  'update',
  'reopen',
]);

/**
 * Decides whether a trigger builds an event. Globs are picomatch's, dotfiles included: `*` stops
 * at a slash and `**` crosses it, so `release/*` matches release/1.2 and `**` matches every
 * branch. A path filter builds when any changed file matches any pattern; when the event does not
 * list its changed files the build goes ahead, and `detail` says so. Deletions never build.
 */
export function decide(filter: TriggerFilter, event: GitEvent): Decision {
  // An empty pattern (never valid, but a column may hold one) is left out rather than thrown on.
  const trigger: TriggerFilter = {
    events: filter.events,
    branches: filter.branches.filter(Boolean),
    tags: filter.tags.filter(Boolean),
    paths: filter.paths.filter(Boolean),
  };
  if (event.kind === 'ping') return refuse('a ping carries nothing to build');
  if (event.deleted) {
    const what = event.tag !== null ? `tag ${event.tag}` : `branch ${event.branch ?? event.ref}`;
    return refuse(`${what} was deleted, and a deletion never builds`);
  }
  if (!trigger.events.includes(event.kind)) {
    return refuse(
      `event ${event.kind} is not one of this trigger's events (${listed(trigger.events)})`,
    );
  }
  switch (event.kind) {
    case 'push':
      return (
        unmatched('branch', event.branch, trigger.branches) ??
        changedPaths(trigger.paths, event.changedFiles)
      );
    case 'tag':
      return (
        unmatched('tag', event.tag, trigger.tags) ??
        (trigger.paths.length === 0
          ? BUILD
          : { build: true, detail: 'path filters do not apply to tags' })
      );
    case 'pull_request':
      return pullRequest(trigger, event);
  }
}

const BUILD: Decision = { build: true };

function refuse(why: string): Decision {
  return { build: false, why };
}

function listed(patterns: readonly string[]): string {
  return patterns.length === 0 ? 'none' : patterns.join(', ');
}

function globs(patterns: readonly string[]): (name: string) => boolean {
  return patterns.length === 0 ? () => false : picomatch([...patterns], { dot: true });
}

/** A refusal when `name` matches none of `patterns`; null when it matches one. */
function unmatched(
  what: 'branch' | 'tag',
  name: string | null,
  patterns: readonly string[],
): Decision | null {
  if (name === null) return refuse(`the event names no ${what}`);
  if (globs(patterns)(name)) return null;
  return refuse(
    patterns.length === 0
      ? `${what} ${name}: this trigger has no ${what} patterns, so no ${what} builds`
      : `${what} ${name} matches none of ${listed(patterns)}`,
  );
}

function changedPaths(patterns: readonly string[], files: readonly string[] | null): Decision {
  if (patterns.length === 0) return BUILD;
  if (files === null) {
    return {
      build: true,
      detail: `the event does not list its changed files, so the path filter (${listed(patterns)}) was not applied`,
    };
  }
  const matches = globs(patterns);
  return files.some((file) => matches(file))
    ? BUILD
    : refuse(`no changed file matches ${listed(patterns)}`);
}

function pullRequest(trigger: TriggerFilter, event: GitEvent): Decision {
  const pr = event.pullRequest;
  if (pr === null) return refuse('the event names no pull request');
  if (!BUILDING_ACTIONS.has(pr.action)) {
    return refuse(
      `pull request #${pr.number}: action ${pr.action} does not build (opening, reopening and new commits do)`,
    );
  }
  if (!globs(trigger.branches)(pr.targetBranch)) {
    return refuse(
      trigger.branches.length === 0
        ? `pull request #${pr.number} targets ${pr.targetBranch}: this trigger has no branch patterns, so no branch builds`
        : `pull request #${pr.number} targets ${pr.targetBranch}, which matches none of ${listed(trigger.branches)}`,
    );
  }
  return changedPaths(trigger.paths, event.changedFiles);
}
