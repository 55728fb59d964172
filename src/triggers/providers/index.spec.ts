import {
  type GitProvider,
  pingPayload,
  pullRequestPayload,
  pushPayload,
  receivedHeaders,
  signedDelivery,
  webhookEvent,
} from '../../../test/support/git-providers.js';
import type { GitEvent } from '../git-event.js';
import { isProviderName, PROVIDER_NAMES, providerOf } from './index.js';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const AFTER = '2f9c1d4b6a8e0f3c5b7d9e1a3c5e7f9b1d3f5a7c';

describe(providerOf.name, () => {
  it.each(PROVIDER_NAMES)('gives the %s provider', (name) => {
    expect(providerOf(name).name).toBe(name);
    expect(isProviderName(name)).toBe(true);
  });

  it('throws for a name it does not know', () => {
    expect(isProviderName('bitbucket')).toBe(false);
    expect(() => providerOf('bitbucket')).toThrow('No webhook provider is named bitbucket');
  });
});

/** What a webhook route does with a delivery: verify the raw bytes, then parse. */
async function received(provider: GitProvider, event: string, payload: object) {
  const { headers, body } = signedDelivery(provider, SECRET, event, payload, {
    deliveryId: `delivery-of-${provider}`,
    gitlabAuth: 'both',
  });
  const webhook = providerOf(provider);
  const node = receivedHeaders(headers);
  expect(await webhook.verify(node, body, SECRET)).toBe(true);
  expect(webhook.deliveryId(node)).toBe(`delivery-of-${provider}`);
  return webhook.parse(webhook.eventName(node)!, JSON.parse(body.toString('utf8')));
}

describe.each(PROVIDER_NAMES)('what test/support/git-providers sends as %s', (provider) => {
  const author = { name: 'Ada Lovelace', email: 'ada@example.com' };

  it('is a push kiln verifies and reads back', async () => {
    const payload = pushPayload(provider, {
      ref: 'refs/heads/release/2.0',
      after: AFTER,
      pusher: 'ada',
      author,
      files: [{ added: ['a.txt'] }, { modified: ['src/b.ts'], removed: ['c.md'] }],
      repositoryUrl: 'https://git.example.com/team/app.git',
    });

    expect(await received(provider, webhookEvent(provider, 'push'), payload)).toEqual<GitEvent>({
      kind: 'push',
      ref: 'refs/heads/release/2.0',
      branch: 'release/2.0',
      tag: null,
      commit: AFTER,
      deleted: false,
      pusher: 'ada',
      author,
      changedFiles: ['a.txt', 'src/b.ts', 'c.md'],
      pullRequest: null,
      repositoryUrl: 'https://git.example.com/team/app.git',
    });
  });

  it('is a push of one commit listing no file when no files are given', async () => {
    const payload = pushPayload(provider, {
      ref: 'refs/heads/main',
      after: AFTER,
      pusher: 'ada',
      author,
    });

    expect(await received(provider, webhookEvent(provider, 'push'), payload)).toMatchObject({
      commit: AFTER,
      changedFiles: [],
      author,
    });
  });

  it('is a push listing no commit at all with files: null', async () => {
    const payload = pushPayload(provider, {
      ref: 'refs/heads/main',
      after: AFTER,
      pusher: 'ada',
      author,
      files: null,
    });

    expect(await received(provider, webhookEvent(provider, 'push'), payload)).toMatchObject({
      commit: AFTER,
      changedFiles: null,
    });
  });

  it('is a tag push', async () => {
    const payload = pushPayload(provider, {
      ref: 'refs/tags/v2.0.0',
      before: '0'.repeat(40),
      after: AFTER,
      pusher: 'ada',
      author,
    });

    expect(await received(provider, webhookEvent(provider, 'tag'), payload)).toMatchObject({
      kind: 'tag',
      tag: 'v2.0.0',
      commit: AFTER,
      changedFiles: null,
      deleted: false,
    });
  });

  it('is a branch deletion', async () => {
    const payload = pushPayload(provider, {
      ref: 'refs/heads/old',
      after: '0'.repeat(40),
      pusher: 'ada',
      author,
    });

    expect(await received(provider, webhookEvent(provider, 'push'), payload)).toMatchObject({
      kind: 'push',
      branch: 'old',
      commit: null,
      deleted: true,
    });
  });

  it('is a pull request', async () => {
    const action = { github: 'synchronize', gitlab: 'update', gitea: 'synchronized' }[
      provider === 'forgejo' ? 'gitea' : provider
    ];
    const payload = pullRequestPayload(provider, {
      action,
      number: 7,
      headRef: 'feature/x',
      headSha: AFTER,
      baseRef: 'main',
      sender: 'grace',
    });

    expect(await received(provider, webhookEvent(provider, 'pull_request'), payload)).toMatchObject(
      {
        kind: 'pull_request',
        branch: 'feature/x',
        commit: AFTER,
        pusher: 'grace',
        pullRequest: { number: 7, action, targetBranch: 'main' },
      },
    );
  });
});

describe('what test/support/git-providers sends as a GitHub ping', () => {
  it('is a ping kiln verifies and reads back', async () => {
    expect(await received('github', 'ping', pingPayload())).toMatchObject({ kind: 'ping' });
  });
});
