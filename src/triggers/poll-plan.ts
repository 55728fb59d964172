import type { GitEvent } from './git-event.js';

/** An event a poll found: always a branch or tag with the commit it points at now. */
export interface PolledEvent extends GitEvent {
  readonly kind: 'push' | 'tag';
  readonly ref: string;
  readonly commit: string;
}

/** What one poll of a trigger's repository does. */
export interface PollPlan {
  /** A push or tag event for each branch or tag that is new or moved, in the listing's order. */
  readonly events: readonly PolledEvent[];
  /** The refs to remember for the next poll: the listing as it is now. */
  readonly next: ReadonlyMap<string, string>;
}

const BRANCH = 'refs/heads/';
const TAG = 'refs/tags/';

/**
 * Compares the refs a poll found (full ref → commit) with those the last one remembered (`null`:
 * none was made yet). The first poll only records: enabling polling must not build every branch
 * there is. A ref that vanished builds nothing (a deletion never builds) and is forgotten; a ref
 * that comes back later is new again.
 */
export function planPoll(
  previous: ReadonlyMap<string, string> | null,
  current: ReadonlyMap<string, string>,
): PollPlan {
  if (previous === null) return { events: [], next: current };
  const events: PolledEvent[] = [];
  for (const [ref, commit] of current) {
    if (previous.get(ref) === commit) continue;
    const event = eventOf(ref, commit);
    if (event !== null) events.push(event);
  }
  return { events, next: current };
}

/** The delivery id of a polled event: a poll and a later one that sees the same commit agree. */
export function pollDeliveryId(ref: string, commit: string): string {
  return `poll:${ref}:${commit}`;
}

function eventOf(ref: string, commit: string): PolledEvent | null {
  const branch = ref.startsWith(BRANCH) ? ref.slice(BRANCH.length) : null;
  const tag = ref.startsWith(TAG) ? ref.slice(TAG.length) : null;
  if (branch === null && tag === null) return null;
  return {
    kind: branch === null ? 'tag' : 'push',
    ref,
    branch,
    tag,
    commit,
    deleted: false,
    pusher: null,
    author: null,
    changedFiles: null,
    pullRequest: null,
    repositoryUrl: null,
  };
}
