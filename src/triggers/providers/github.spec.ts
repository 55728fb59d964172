import { createHmac } from 'node:crypto';
import { fixture, receivedHeaders, signedDelivery } from '../../../test/support/git-providers.js';
import { github } from './github.js';
import { PayloadError } from './payload.js';

const SECRET = 'It was a bright cold day in April';

function delivery(payload: object = fixture('github-push')) {
  const { headers, body } = signedDelivery('github', SECRET, 'push', payload, {
    deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
  });
  return { headers: receivedHeaders(headers), body };
}

describe('github.verify', () => {
  it('accepts the X-Hub-Signature-256 GitHub computes over the body', async () => {
    const { headers, body } = delivery();

    await expect(github.verify(headers, body, SECRET)).resolves.toBe(true);
  });

  it('refuses a signature made with another secret', async () => {
    const { headers, body } = delivery();

    await expect(github.verify(headers, body, 'another secret')).resolves.toBe(false);
  });

  it('refuses a delivery without X-Hub-Signature-256', async () => {
    const { headers, body } = delivery();
    delete headers['x-hub-signature-256'];

    await expect(github.verify(headers, body, SECRET)).resolves.toBe(false);
  });

  it('refuses a delivery signed only with SHA-1 (X-Hub-Signature)', async () => {
    const { headers, body } = delivery();
    expect(headers['x-hub-signature']).toMatch(/^sha1=[0-9a-f]{40}$/);
    delete headers['x-hub-signature-256'];

    await expect(github.verify(headers, body, SECRET)).resolves.toBe(false);
  });

  it('refuses a body changed after signing, by one byte', async () => {
    const { headers, body } = delivery();
    const changed = Buffer.from(body);
    changed[changed.indexOf('main')] = 'M'.charCodeAt(0);

    await expect(github.verify(headers, changed, SECRET)).resolves.toBe(false);
  });

  it('refuses a SHA-1 signature presented as the SHA-256 one', async () => {
    const { headers, body } = delivery();
    headers['x-hub-signature-256'] = headers['x-hub-signature']!;

    await expect(github.verify(headers, body, SECRET)).resolves.toBe(false);
  });

  it.each<[string, { body?: Buffer; signature?: string; secret?: string }]>([
    ['an empty secret', { secret: '' }],
    ['an empty body', { body: Buffer.alloc(0) }],
    ['a signature of another form', { signature: 'sha256=zz' }],
  ])('answers false, without throwing, for %s', async (_, change) => {
    const { headers, body } = delivery();
    if (change.signature !== undefined) headers['x-hub-signature-256'] = change.signature;

    await expect(
      github.verify(headers, change.body ?? body, change.secret ?? SECRET),
    ).resolves.toBe(false);
  });

  it('refuses a body that is not UTF-8 even when its bytes are signed, so no two bodies share a signature', async () => {
    const body = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]);
    const signature = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

    await expect(github.verify({ 'x-hub-signature-256': signature }, body, SECRET)).resolves.toBe(
      false,
    );
  });
});

describe('github headers', () => {
  it('reads the delivery id from X-GitHub-Delivery and the event from X-GitHub-Event', () => {
    const { headers } = delivery();

    expect(github.deliveryId(headers)).toBe('72d3162e-cc78-11e3-81ab-4c9367dc0958');
    expect(github.eventName(headers)).toBe('push');
  });

  it('answers null for headers that are absent', () => {
    expect(github.deliveryId({})).toBeNull();
    expect(github.eventName({})).toBeNull();
  });
});

describe('github.parse', () => {
  it('reads a push to a branch, with the files of all its commits', () => {
    expect(github.parse('push', fixture('github-push'))).toEqual({
      kind: 'push',
      ref: 'refs/heads/main',
      branch: 'main',
      tag: null,
      commit: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
      deleted: false,
      pusher: 'octocat',
      author: { name: 'Mona Lisa Octocat', email: 'mona@github.com' },
      changedFiles: ['Dockerfile', 'README.md', 'src/server.ts', 'docs/old.md'],
      pullRequest: null,
      repositoryUrl: 'https://github.com/octo-org/hello-world.git',
    });
  });

  it('reads a tag push as kind tag, building the commit the tag points at rather than its tag object', () => {
    const event = github.parse('push', fixture('github-push-tag'));

    expect(event).toMatchObject({
      kind: 'tag',
      ref: 'refs/tags/v1.4.0',
      branch: null,
      tag: 'v1.4.0',
      commit: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
      deleted: false,
      changedFiles: null,
    });
  });

  it('reads a branch deletion: deleted, with no commit to build', () => {
    expect(github.parse('push', fixture('github-push-delete'))).toMatchObject({
      kind: 'push',
      branch: 'feature/login',
      commit: null,
      deleted: true,
      author: null,
      changedFiles: null,
    });
  });

  it('takes an all-zero after as a deletion even without deleted: true', () => {
    const payload = { ...fixture('github-push-delete'), deleted: false };

    expect(github.parse('push', payload)).toMatchObject({ deleted: true, commit: null });
  });

  it.each([
    ['opened', 'github-pull-request-opened', 'c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6'],
    ['synchronize', 'github-pull-request-synchronize', 'e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80912'],
    ['closed', 'github-pull-request-closed', 'c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6'],
  ])(
    'reads a pull_request %s, its head to build and its base as the target',
    (action, name, sha) => {
      expect(github.parse('pull_request', fixture(name))).toEqual({
        kind: 'pull_request',
        ref: 'refs/pull/42/head',
        branch: 'feature/passkeys',
        tag: null,
        commit: sha,
        deleted: false,
        pusher: 'hubot',
        author: null,
        changedFiles: null,
        pullRequest: { number: 42, action, targetBranch: 'main' },
        repositoryUrl: 'https://github.com/octo-org/hello-world.git',
      });
    },
  );

  it('reads a ping', () => {
    expect(github.parse('ping', fixture('github-ping'))).toMatchObject({
      kind: 'ping',
      commit: null,
      repositoryUrl: 'https://github.com/octo-org/hello-world.git',
    });
  });

  it.each(['create', 'delete', 'issues', 'release', 'workflow_run'])(
    'ignores %s (a new or deleted ref also comes as a push)',
    (event) => {
      expect(github.parse(event, fixture('github-push'))).toBeNull();
    },
  );

  it('ignores a push of a ref that is neither a branch nor a tag', () => {
    expect(
      github.parse('push', { ...fixture('github-push'), ref: 'refs/notes/commits' }),
    ).toBeNull();
  });
});

describe('github.parse: changed files', () => {
  const push = (change: Record<string, unknown>) =>
    github.parse('push', { ...fixture('github-push'), ...change });

  it('are unknown when the push lists no commit (a new branch at an existing commit)', () => {
    expect(push({ commits: [] })?.changedFiles).toBeNull();
  });

  it('are unknown when a commit does not list its files', () => {
    const [first, second] = fixture('github-push').commits;
    delete second.added;

    expect(push({ commits: [first, second] })?.changedFiles).toBeNull();
  });

  it('are unknown when the payload counts more commits than it lists', () => {
    expect(push({ size: 3 })?.changedFiles).toBeNull();
    expect(push({ size: 2 })?.changedFiles).toHaveLength(4);
  });

  it('are unknown when the push lists as many commits as GitHub ever lists (2048)', () => {
    const commit = fixture('github-push').commits[0];

    expect(push({ commits: Array.from({ length: 2048 }, () => commit) })?.changedFiles).toBeNull();
    expect(push({ commits: Array.from({ length: 2047 }, () => commit) })?.changedFiles).toEqual([
      'Dockerfile',
      'README.md',
    ]);
  });

  it('are an empty list when the commits list no file', () => {
    const commit = { ...fixture('github-push').commits[0], added: [], modified: [], removed: [] };

    expect(push({ commits: [commit] })?.changedFiles).toEqual([]);
  });
});

describe('github.parse: payloads that do not fit', () => {
  function refusal(event: string, payload: unknown): PayloadError {
    try {
      github.parse(event, payload);
    } catch (error) {
      expect(error).toBeInstanceOf(PayloadError);
      return error as PayloadError;
    }
    throw new Error('parse accepted the payload');
  }
  const push = fixture('github-push');
  const pr = fixture('github-pull-request-opened');

  it.each([
    ['after is a number', { ...push, after: 42 }, 'after'],
    ['after is not 40 hex digits', { ...push, after: '0d1a26e' }, 'after'],
    ['after has a non-hex digit', { ...push, after: `${'g'.repeat(40)}` }, 'after'],
    ['ref is missing', { ...push, ref: undefined }, 'ref'],
    ['ref is not a full ref', { ...push, ref: 'main' }, 'ref'],
    ['ref names no branch', { ...push, ref: 'refs/heads/' }, 'ref'],
    ['before is missing', { ...push, before: null }, 'before'],
    ['commits is an object', { ...push, commits: {} }, 'commits'],
    ['a commit is a string', { ...push, commits: ['b8f2a7e'] }, 'commits[0]'],
    [
      'a listed file is a number',
      { ...push, commits: [{ ...push.commits[0], modified: ['README.md', 7] }] },
      'commits[0].modified[1]',
    ],
    ['the pusher is missing', { ...push, pusher: undefined }, 'pusher'],
    ['the pusher has no name', { ...push, pusher: { email: 'a@b.c' } }, 'pusher.name'],
    ['head_commit.id is not a sha', { ...push, head_commit: { id: 'HEAD' } }, 'head_commit.id'],
    ['deleted is a string', { ...push, deleted: 'false' }, 'deleted'],
  ])('refuses a push where %s, naming the field', (_, payload, field) => {
    expect(refusal('push', payload).field).toBe(field);
  });

  it.each([
    ['number is a string', { ...pr, number: '42' }, 'number'],
    ['number is negative', { ...pr, number: -1 }, 'number'],
    ['action is missing', { ...pr, action: undefined }, 'action'],
    [
      'the head sha is missing',
      { ...pr, pull_request: { ...pr.pull_request, head: { ref: 'x' } } },
      'pull_request.head.sha',
    ],
    [
      'the base is a string',
      { ...pr, pull_request: { ...pr.pull_request, base: 'main' } },
      'pull_request.base',
    ],
  ])('refuses a pull_request where %s, naming the field', (_, payload, field) => {
    expect(refusal('pull_request', payload).field).toBe(field);
  });

  it.each([
    ['an array', []],
    ['null', null],
    ['a string', 'push'],
  ])('refuses a body that is %s', (_, payload) => {
    expect(refusal('push', payload).field).toBe('body');
  });

  it('says which field and why in its message and details', () => {
    const error = refusal('push', { ...push, after: 42 });

    expect(error.message).toBe("The payload's after must be a commit sha of 40 hex digits");
    expect(error.details).toEqual({ after: 'must be a commit sha of 40 hex digits' });
  });

  it('reads a payload nested far deeper than it looks, without walking it', () => {
    let deep: unknown = {};
    for (let i = 0; i < 100_000; i++) deep = { deep };

    expect(github.parse('push', { ...push, unrelated: deep })?.commit).toBe(push.after);
  });
});
