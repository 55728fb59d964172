import { randomBytes } from 'node:crypto';
import {
  type DeliveryOptions,
  fixture,
  receivedHeaders,
  signedDelivery,
} from '../../../test/support/git-providers.js';
import { gitlab } from './gitlab.js';
import { PayloadError } from './payload.js';

const TOKEN = 'glpat-not-a-token-but-a-webhook-secret';
/** A secret GitLab takes as a signing token as well as a secret token. */
const SIGNING = `whsec_${randomBytes(32).toString('base64')}`;

function delivery(secret: string, opts: DeliveryOptions = {}) {
  const { headers, body } = signedDelivery('gitlab', secret, 'Push Hook', fixture('gitlab-push'), {
    deliveryId: 'f5e5f430-f57b-4e6e-9fac-d9128cd7232f',
    ...opts,
  });
  return { headers: receivedHeaders(headers), body };
}

function changed(body: Buffer): Buffer {
  const copy = Buffer.from(body);
  copy[copy.indexOf('main')] = 'M'.charCodeAt(0);
  return copy;
}

describe('gitlab.verify with the secret token (X-Gitlab-Token)', () => {
  it('accepts the token GitLab sends back', async () => {
    const { headers, body } = delivery(TOKEN);

    await expect(gitlab.verify(headers, body, TOKEN)).resolves.toBe(true);
  });

  it.each([
    ['another token of the same length', TOKEN.replace('g', 'h')],
    ['a prefix of the token', TOKEN.slice(0, -1)],
    ['a longer token', `${TOKEN}x`],
    ['the token in another case', TOKEN.toUpperCase()],
  ])('refuses %s', async (_, sent) => {
    const { headers, body } = delivery(sent);

    await expect(gitlab.verify(headers, body, TOKEN)).resolves.toBe(false);
  });

  it('refuses a delivery without X-Gitlab-Token (nor a signature)', async () => {
    const { headers, body } = delivery(TOKEN);
    delete headers['x-gitlab-token'];

    await expect(gitlab.verify(headers, body, TOKEN)).resolves.toBe(false);
  });

  it('accepts a body changed after sending: the token does not cover the body, as GitLab documents', async () => {
    const { headers, body } = delivery(TOKEN);

    await expect(gitlab.verify(headers, changed(body), TOKEN)).resolves.toBe(true);
  });

  it('refuses everything when the secret is empty', async () => {
    const { headers, body } = delivery('');

    await expect(gitlab.verify(headers, body, '')).resolves.toBe(false);
  });
});

describe('gitlab.verify with the signing token (webhook-signature)', () => {
  it.each(['signing-token', 'both'] as const)(
    'accepts a delivery GitLab signed (%s)',
    async (gitlabAuth) => {
      const { headers, body } = delivery(SIGNING, { gitlabAuth });
      expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

      await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(true);
    },
  );

  it('refuses a signature made with another signing token', async () => {
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    const { headers, body } = delivery(other, { gitlabAuth: 'signing-token' });

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
  });

  it('refuses a body changed after signing', async () => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'signing-token' });

    await expect(gitlab.verify(headers, changed(body), SIGNING)).resolves.toBe(false);
  });

  it.each([
    ['webhook-id', 'another-id'],
    ['webhook-timestamp', '1700000000'],
  ])('refuses a delivery whose %s changed after signing', async (name, value) => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'signing-token' });
    headers[name] = value;

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
  });

  it.each(['webhook-id', 'webhook-timestamp'])(
    'refuses a signed delivery without %s',
    async (name) => {
      const { headers, body } = delivery(SIGNING, { gitlabAuth: 'signing-token' });
      delete headers[name];

      await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
    },
  );

  it('refuses a right token beside a wrong signature', async () => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'both' });
    headers['webhook-signature'] = `v1,${randomBytes(32).toString('base64')}`;

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
  });

  it('refuses a right signature beside a wrong token', async () => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'both' });
    headers['x-gitlab-token'] = 'guessed';

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
  });

  it('accepts a list of signatures of which one is right (a signing token being rotated)', async () => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'signing-token' });
    headers['webhook-signature'] =
      `v1,${randomBytes(32).toString('base64')} ${headers['webhook-signature']}`;

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(true);
  });

  it.each([
    ['a signature of another version', (s: string) => s.replace('v1,', 'v2,')],
    ['a truncated signature', (s: string) => s.slice(0, -4)],
    ['more signatures than anyone sends', (s: string) => `${`${s} `.repeat(9)}`.trim()],
  ])('refuses %s', async (_, alter) => {
    const { headers, body } = delivery(SIGNING, { gitlabAuth: 'signing-token' });
    headers['webhook-signature'] = alter(headers['webhook-signature']!);

    await expect(gitlab.verify(headers, body, SIGNING)).resolves.toBe(false);
  });

  it('signs with the secret as text when it is not a whsec_ key', async () => {
    const { headers, body } = delivery(TOKEN, { gitlabAuth: 'signing-token' });

    await expect(gitlab.verify(headers, body, TOKEN)).resolves.toBe(true);
  });
});

describe('gitlab headers', () => {
  it('reads the delivery id from Idempotency-Key, which stays the same across retries', () => {
    const { headers } = delivery(TOKEN);
    headers['x-gitlab-event-uuid'] = '13792a34-cac6-4fda-95a8-c58e00a3954e';

    expect(gitlab.deliveryId(headers)).toBe('f5e5f430-f57b-4e6e-9fac-d9128cd7232f');
  });

  it('falls back on X-Gitlab-Event-UUID from a GitLab older than 17.4', () => {
    const { headers } = delivery(TOKEN);
    delete headers['idempotency-key'];
    headers['x-gitlab-event-uuid'] = '13792a34-cac6-4fda-95a8-c58e00a3954e';

    expect(gitlab.deliveryId(headers)).toBe('13792a34-cac6-4fda-95a8-c58e00a3954e');
    expect(gitlab.deliveryId({})).toBeNull();
  });

  it('reads the event from X-Gitlab-Event', () => {
    expect(gitlab.eventName(delivery(TOKEN).headers)).toBe('Push Hook');
  });
});

describe('gitlab.parse', () => {
  it('reads a Push Hook, its author from the commit it builds', () => {
    expect(gitlab.parse('Push Hook', fixture('gitlab-push'))).toEqual({
      kind: 'push',
      ref: 'refs/heads/main',
      branch: 'main',
      tag: null,
      commit: 'da1560886d4f094c3e6c9ef40349f7d38b5d27d7',
      deleted: false,
      pusher: 'jsmith',
      author: { name: 'GitLab dev user', email: 'gitlabdev@dv6700.(none)' },
      changedFiles: ['CHANGELOG', 'app/controller/application.rb'],
      pullRequest: null,
      repositoryUrl: 'https://gitlab.example.com/mike/diaspora.git',
    });
  });

  it('reads a Tag Push Hook, building checkout_sha (the commit) rather than after (the tag object)', () => {
    expect(gitlab.parse('Tag Push Hook', fixture('gitlab-tag-push'))).toEqual({
      kind: 'tag',
      ref: 'refs/tags/v1.0.0',
      branch: null,
      tag: 'v1.0.0',
      commit: 'da1560886d4f094c3e6c9ef40349f7d38b5d27d7',
      deleted: false,
      pusher: 'jsmith',
      author: null,
      changedFiles: null,
      pullRequest: null,
      repositoryUrl: 'https://gitlab.example.com/jsmith/example.git',
    });
  });

  it('reads a branch deletion (after all zeros, no checkout_sha)', () => {
    const payload = {
      ...fixture('gitlab-push'),
      after: '0000000000000000000000000000000000000000',
      checkout_sha: null,
      commits: [],
      total_commits_count: 0,
    };

    expect(gitlab.parse('Push Hook', payload)).toMatchObject({
      branch: 'main',
      commit: null,
      deleted: true,
      author: null,
      changedFiles: null,
    });
  });

  it('does not know the changed files when GitLab lists only some of the commits (the last 20)', () => {
    const payload = { ...fixture('gitlab-push'), total_commits_count: 21 };

    expect(gitlab.parse('Push Hook', payload)?.changedFiles).toBeNull();
  });

  it.each([
    ['open', 'gitlab-merge-request-open', 'open', 'da1560886d4f094c3e6c9ef40349f7d38b5d27d7'],
    ['update', 'gitlab-merge-request-update', 'update', '4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a59'],
    ['close', 'gitlab-merge-request-close', 'close', 'da1560886d4f094c3e6c9ef40349f7d38b5d27d7'],
  ])('reads a Merge Request Hook %s', (_, name, action, sha) => {
    const author =
      action === 'update'
        ? { name: 'Dmitriy Zaporozhets', email: 'dmitriy.zaporozhets@gmail.com' }
        : { name: 'GitLab dev user', email: 'gitlabdev@dv6700.(none)' };

    expect(gitlab.parse('Merge Request Hook', fixture(name))).toEqual({
      kind: 'pull_request',
      ref: 'refs/merge-requests/1/head',
      branch: 'ms-viewport',
      tag: null,
      commit: sha,
      deleted: false,
      pusher: 'root',
      author,
      changedFiles: null,
      pullRequest: { number: 1, action, targetBranch: 'main' },
      repositoryUrl: 'https://gitlab.example.com/gitlabhq/gitlab-test.git',
    });
  });

  it('reads an update that brings no commit (a title or label changed) as update-without-commits', () => {
    const payload = fixture('gitlab-merge-request-update');
    delete payload.object_attributes.oldrev;

    expect(gitlab.parse('Merge Request Hook', payload)?.pullRequest?.action).toBe(
      'update-without-commits',
    );
  });

  it.each(['Note Hook', 'Pipeline Hook', 'Issue Hook', 'System Hook', 'Release Hook'])(
    'ignores a %s',
    (event) => {
      expect(gitlab.parse(event, fixture('gitlab-push'))).toBeNull();
    },
  );
});

describe('gitlab.parse: payloads that do not fit', () => {
  function field(event: string, payload: unknown): string {
    try {
      gitlab.parse(event, payload);
    } catch (error) {
      expect(error).toBeInstanceOf(PayloadError);
      return (error as PayloadError).field;
    }
    throw new Error('parse accepted the payload');
  }
  const push = fixture('gitlab-push');
  const mr = fixture('gitlab-merge-request-open');

  it.each([
    ['after is a number', { ...push, after: 42 }, 'after'],
    ['checkout_sha is short', { ...push, checkout_sha: 'da15608' }, 'checkout_sha'],
    ['ref is missing', { ...push, ref: undefined }, 'ref'],
    ['object_kind is another kind', { ...push, object_kind: 'tag_push' }, 'object_kind'],
    ['user_username is missing', { ...push, user_username: undefined }, 'user_username'],
    [
      'total_commits_count is a string',
      { ...push, total_commits_count: '2' },
      'total_commits_count',
    ],
    [
      'a commit id is not a sha',
      { ...push, commits: [{ ...push.commits[0], id: 42 }] },
      'commits[0].id',
    ],
  ])('refuses a Push Hook where %s', (_, payload, name) => {
    expect(field('Push Hook', payload)).toBe(name);
  });

  it.each([
    [
      'iid is missing',
      { ...mr, object_attributes: { ...mr.object_attributes, iid: undefined } },
      'object_attributes.iid',
    ],
    [
      'last_commit.id is not a sha',
      { ...mr, object_attributes: { ...mr.object_attributes, last_commit: { id: 'x' } } },
      'object_attributes.last_commit.id',
    ],
    ['the user has no username', { ...mr, user: { id: 1 } }, 'user.username'],
    ['object_attributes is missing', { ...mr, object_attributes: undefined }, 'object_attributes'],
  ])('refuses a Merge Request Hook where %s', (_, payload, name) => {
    expect(field('Merge Request Hook', payload)).toBe(name);
  });
});
