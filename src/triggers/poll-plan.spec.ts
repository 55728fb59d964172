import type { GitEvent } from './git-event.js';
import { planPoll, pollDeliveryId } from './poll-plan.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);

const refs = (entries: Record<string, string>): ReadonlyMap<string, string> =>
  new Map(Object.entries(entries));

/** An event as planPoll makes it: what a poll cannot know stays null. */
function polled(kind: 'push' | 'tag', name: string, commit: string): GitEvent {
  return {
    kind,
    ref: kind === 'push' ? `refs/heads/${name}` : `refs/tags/${name}`,
    branch: kind === 'push' ? name : null,
    tag: kind === 'tag' ? name : null,
    commit,
    deleted: false,
    pusher: null,
    author: null,
    changedFiles: null,
    pullRequest: null,
    repositoryUrl: null,
  };
}

describe(planPoll.name, () => {
  const rows: [
    name: string,
    previous: Record<string, string> | null,
    current: Record<string, string>,
    events: GitEvent[],
  ][] = [
    [
      'the first poll only records what is there',
      null,
      { 'refs/heads/main': A, 'refs/heads/dev': B, 'refs/tags/v1': A },
      [],
    ],
    ['the first poll of an empty repository records nothing', null, {}, []],
    ['nothing changed: no event', { 'refs/heads/main': A }, { 'refs/heads/main': A }, []],
    [
      'a branch that moved is a push of its new commit',
      { 'refs/heads/main': A },
      { 'refs/heads/main': B },
      [polled('push', 'main', B)],
    ],
    [
      'a new branch is a push',
      { 'refs/heads/main': A },
      { 'refs/heads/main': A, 'refs/heads/release/1.2': C },
      [polled('push', 'release/1.2', C)],
    ],
    [
      'a new tag is a tag event, even on a commit already built',
      { 'refs/heads/main': A },
      { 'refs/heads/main': A, 'refs/tags/v1.0.0': A },
      [polled('tag', 'v1.0.0', A)],
    ],
    [
      'a tag moved to another commit is a tag event',
      { 'refs/tags/latest': A },
      { 'refs/tags/latest': B },
      [polled('tag', 'latest', B)],
    ],
    [
      'a deleted branch or tag builds nothing',
      { 'refs/heads/main': A, 'refs/heads/gone': B, 'refs/tags/old': C },
      { 'refs/heads/main': A },
      [],
    ],
    [
      'several changes at once: one event each, in the listing’s order',
      { 'refs/heads/main': A, 'refs/heads/dev': A },
      { 'refs/heads/dev': B, 'refs/heads/main': C, 'refs/tags/v2': C },
      [polled('push', 'dev', B), polled('push', 'main', C), polled('tag', 'v2', C)],
    ],
    [
      'a branch of the same name as a tag is told apart by its ref',
      { 'refs/tags/x': A },
      { 'refs/tags/x': A, 'refs/heads/x': B },
      [polled('push', 'x', B)],
    ],
    [
      'a ref that is neither a branch nor a tag builds nothing',
      { 'refs/heads/main': A },
      { 'refs/heads/main': A, 'refs/notes/commits': B },
      [],
    ],
    [
      'a previous poll that found an empty repository: its first branch builds',
      {},
      { 'refs/heads/main': A },
      [polled('push', 'main', A)],
    ],
  ];

  it.each(rows)('%s', (_name, previous, current, events) => {
    const plan = planPoll(previous === null ? null : refs(previous), refs(current));

    expect(plan.events).toEqual(events);
    expect(Object.fromEntries(plan.next)).toEqual(current);
  });

  it('forgets a deleted ref, so that a branch pushed again under its name builds', () => {
    const first = planPoll(
      refs({ 'refs/heads/main': A, 'refs/heads/x': B }),
      refs({ 'refs/heads/main': A }),
    );

    const second = planPoll(first.next, refs({ 'refs/heads/main': A, 'refs/heads/x': B }));

    expect(second.events).toEqual([polled('push', 'x', B)]);
  });
});

describe(pollDeliveryId.name, () => {
  it('names the ref and the commit', () => {
    expect(pollDeliveryId('refs/heads/main', A)).toBe(`poll:refs/heads/main:${A}`);
  });
});
