import { decide, type Decision, type TriggerFilter } from './filters.js';
import type { GitEvent } from './git-event.js';

const SHA = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';

const EVERYTHING: TriggerFilter = {
  events: ['push', 'tag', 'pull_request'],
  branches: ['**'],
  tags: ['**'],
  paths: [],
};

function push(branch: string, changedFiles: readonly string[] | null = ['src/a.ts']): GitEvent {
  return {
    kind: 'push',
    ref: `refs/heads/${branch}`,
    branch,
    tag: null,
    commit: SHA,
    deleted: false,
    pusher: 'octocat',
    author: { name: 'Mona', email: 'mona@example.com' },
    changedFiles,
    pullRequest: null,
    repositoryUrl: null,
  };
}

function tag(name: string): GitEvent {
  return { ...push('x', null), kind: 'tag', ref: `refs/tags/${name}`, branch: null, tag: name };
}

function pullRequest(action: string, targetBranch = 'main'): GitEvent {
  return {
    ...push('feature/x', null),
    kind: 'pull_request',
    ref: 'refs/pull/7/head',
    pullRequest: { number: 7, action, targetBranch },
  };
}

function deletion(event: GitEvent): GitEvent {
  return { ...event, commit: null, deleted: true, changedFiles: null };
}

const ping: GitEvent = { ...push('x', null), kind: 'ping', ref: null, branch: null, commit: null };

const BUILD: Decision = { build: true };
const refused = (why: string): Decision => ({ build: false, why });

describe(decide.name, () => {
  it.each<[string, Partial<TriggerFilter>, GitEvent, Decision]>([
    // Events
    ['a push, pushes on', { events: ['push'] }, push('main'), BUILD],
    [
      'a pull request, pushes only',
      { events: ['push'] },
      pullRequest('opened'),
      refused("event pull_request is not one of this trigger's events (push)"),
    ],
    [
      'a tag, pushes and pull requests only',
      { events: ['push', 'pull_request'] },
      tag('v1'),
      refused("event tag is not one of this trigger's events (push, pull_request)"),
    ],
    [
      'a push, no events',
      { events: [] },
      push('main'),
      refused("event push is not one of this trigger's events (none)"),
    ],
    ['a ping', {}, ping, refused('a ping carries nothing to build')],

    // Branches
    ['main, branches main', { branches: ['main'] }, push('main'), BUILD],
    [
      'release/1.2, branches main and release/*',
      { branches: ['main', 'release/*'] },
      push('release/1.2'),
      BUILD,
    ],
    [
      'feature/x, branches main and release/*',
      { branches: ['main', 'release/*'] },
      push('feature/x'),
      refused('branch feature/x matches none of main, release/*'),
    ],
    [
      'feature/x, branches * (a star stops at a slash)',
      { branches: ['*'] },
      push('feature/x'),
      refused('branch feature/x matches none of *'),
    ],
    ['feature/x, branches **', { branches: ['**'] }, push('feature/x'), BUILD],
    [
      'release/2/hotfix, branches release/**',
      { branches: ['release/**'] },
      push('release/2/hotfix'),
      BUILD,
    ],
    ['.hidden, branches * (dotfiles count)', { branches: ['*'] }, push('.hidden'), BUILD],
    ['v2-main, branches v{1,2}-main', { branches: ['v{1,2}-main'] }, push('v2-main'), BUILD],
    [
      'main, no branch patterns',
      { branches: [] },
      push('main'),
      refused('branch main: this trigger has no branch patterns, so no branch builds'),
    ],
    [
      'Main, branches main (case counts)',
      { branches: ['main'] },
      push('Main'),
      refused('branch Main matches none of main'),
    ],

    // Tags
    ['v1.2.0, tags v*', { tags: ['v*'] }, tag('v1.2.0'), BUILD],
    [
      'nightly, tags v* and release-*',
      { tags: ['v*', 'release-*'] },
      tag('nightly'),
      refused('tag nightly matches none of v*, release-*'),
    ],
    [
      'v1, no tag patterns',
      { tags: [] },
      tag('v1'),
      refused('tag v1: this trigger has no tag patterns, so no tag builds'),
    ],
    [
      'v1 with branches main only: tags are matched by tag patterns',
      { branches: ['main'] },
      tag('v1'),
      BUILD,
    ],
    [
      'v1 with a path filter',
      { tags: ['v*'], paths: ['src/**'] },
      tag('v1'),
      { build: true, detail: 'path filters do not apply to tags' },
    ],

    // Deletions
    [
      'a deleted branch',
      {},
      deletion(push('feature/x')),
      refused('branch feature/x was deleted, and a deletion never builds'),
    ],
    [
      'a deleted tag',
      {},
      deletion(tag('v1')),
      refused('tag v1 was deleted, and a deletion never builds'),
    ],

    // Paths
    [
      'src/a.ts changed, paths src/**',
      { paths: ['src/**'] },
      push('main', ['README.md', 'src/a.ts']),
      BUILD,
    ],
    [
      'only docs changed, paths src/**',
      { paths: ['src/**'] },
      push('main', ['README.md', 'docs/x.md']),
      refused('no changed file matches src/**'),
    ],
    [
      'nothing changed, paths src/**',
      { paths: ['src/**'] },
      push('main', []),
      refused('no changed file matches src/**'),
    ],
    [
      'a dotfile changed, paths **/.env*',
      { paths: ['**/.env*'] },
      push('main', ['config/.env.prod']),
      BUILD,
    ],
    [
      'Dockerfile changed, paths Dockerfile and src/**',
      { paths: ['Dockerfile', 'src/**'] },
      push('main', ['Dockerfile']),
      BUILD,
    ],
    [
      'unknown changes, paths src/**',
      { paths: ['src/**'] },
      push('main', null),
      {
        build: true,
        detail:
          'the event does not list its changed files, so the path filter (src/**) was not applied',
      },
    ],
    ['unknown changes, no paths', { paths: [] }, push('main', null), BUILD],
    [
      'docs changed, on a branch that does not match: the branch is the reason',
      { branches: ['main'], paths: ['src/**'] },
      push('dev', ['docs/x.md']),
      refused('branch dev matches none of main'),
    ],

    // Pull requests
    ...['opened', 'synchronize', 'reopened', 'open', 'update', 'reopen', 'synchronized'].map(
      (action): [string, Partial<TriggerFilter>, GitEvent, Decision] => [
        `a pull request ${action}`,
        {},
        pullRequest(action),
        BUILD,
      ],
    ),
    ...['closed', 'close', 'merge', 'edited', 'labeled', 'update-without-commits'].map(
      (action): [string, Partial<TriggerFilter>, GitEvent, Decision] => [
        `a pull request ${action}`,
        {},
        pullRequest(action),
        refused(
          `pull request #7: action ${action} does not build (opening, reopening and new commits do)`,
        ),
      ],
    ),
    [
      'a pull request to main, branches main',
      { branches: ['main'] },
      pullRequest('opened', 'main'),
      BUILD,
    ],
    [
      'a pull request to dev, branches main and release/*: the target branch counts',
      { branches: ['main', 'release/*'] },
      pullRequest('opened', 'dev'),
      refused('pull request #7 targets dev, which matches none of main, release/*'),
    ],
    [
      'a pull request from feature/x to main, branches feature/*: the head branch does not count',
      { branches: ['feature/*'] },
      pullRequest('opened', 'main'),
      refused('pull request #7 targets main, which matches none of feature/*'),
    ],
    [
      'a pull request, no branch patterns',
      { branches: [] },
      pullRequest('opened'),
      refused(
        'pull request #7 targets main: this trigger has no branch patterns, so no branch builds',
      ),
    ],
    [
      'a pull request with a path filter',
      { paths: ['src/**'] },
      pullRequest('synchronize'),
      {
        build: true,
        detail:
          'the event does not list its changed files, so the path filter (src/**) was not applied',
      },
    ],
  ])('%s', (_, filter, event, expected) => {
    expect(decide({ ...EVERYTHING, ...filter }, event)).toEqual(expected);
  });

  it('ignores an empty pattern rather than throwing on it', () => {
    expect(decide({ ...EVERYTHING, branches: ['', 'main'] }, push('main'))).toEqual(BUILD);
    expect(decide({ ...EVERYTHING, paths: [''] }, push('main', ['README.md']))).toEqual(BUILD);
    expect(decide({ ...EVERYTHING, tags: [''] }, tag('v1'))).toEqual(
      refused('tag v1: this trigger has no tag patterns, so no tag builds'),
    );
  });
});
