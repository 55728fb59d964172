import { fixture, receivedHeaders, signedDelivery } from '../../../test/support/git-providers.js';
import { forgejo, gitea } from './gitea.js';
import { PayloadError } from './payload.js';

const SECRET = 'a webhook secret for gitea';

function delivery(provider: 'gitea' | 'forgejo', event = 'push', payload = fixture('gitea-push')) {
  const { headers, body } = signedDelivery(provider, SECRET, event, payload, {
    deliveryId: '6c9b2f36-5a1d-4f0e-8a8e-1b2c3d4e5f60',
  });
  return { headers: receivedHeaders(headers), body };
}

describe.each([
  ['gitea', gitea],
  ['forgejo', forgejo],
] as const)('%s.verify', (name, provider) => {
  it('accepts the signature it computes over the body', async () => {
    const { headers, body } = delivery(name);

    await expect(provider.verify(headers, body, SECRET)).resolves.toBe(true);
  });

  it('refuses a signature made with another secret', async () => {
    const { headers, body } = delivery(name);

    await expect(provider.verify(headers, body, 'not the secret')).resolves.toBe(false);
  });

  it('refuses a delivery without a signature header', async () => {
    const { headers, body } = delivery(name);
    delete headers['x-gitea-signature'];
    delete headers['x-forgejo-signature'];

    await expect(provider.verify(headers, body, SECRET)).resolves.toBe(false);
  });

  it('refuses a body changed after signing, by one byte', async () => {
    const { headers, body } = delivery(name);
    const changed = Buffer.from(body);
    changed[changed.indexOf('main')] = 'M'.charCodeAt(0);

    await expect(provider.verify(headers, changed, SECRET)).resolves.toBe(false);
  });

  it('refuses the body re-serialized without Gitea’s indentation: the bytes are what is signed', async () => {
    const { headers, body } = delivery(name);
    const compact = Buffer.from(JSON.stringify(JSON.parse(body.toString())));

    await expect(provider.verify(headers, compact, SECRET)).resolves.toBe(false);
  });

  it.each([
    ['an empty signature (a webhook without a secret)', () => ''],
    ['a signature with a sha256= prefix', (signature: string) => `sha256=${signature}`],
    ['a truncated signature', (signature: string) => signature.slice(2)],
    ['a signature that is not hex', (signature: string) => `zz${signature.slice(2)}`],
  ])('refuses %s', async (_, alter) => {
    const { headers, body } = delivery(name);
    const altered = alter(headers['x-gitea-signature']!);
    headers['x-gitea-signature'] = altered;
    headers['x-forgejo-signature'] = altered;

    await expect(provider.verify(headers, body, SECRET)).resolves.toBe(false);
  });

  it('refuses everything when the secret is empty', async () => {
    const { headers, body } = delivery(name);

    await expect(provider.verify(headers, body, '')).resolves.toBe(false);
  });

  it('reads its delivery id and event', () => {
    const { headers } = delivery(name, 'pull_request', fixture('gitea-pull-request-opened'));

    expect(provider.deliveryId(headers)).toBe('6c9b2f36-5a1d-4f0e-8a8e-1b2c3d4e5f60');
    expect(provider.eventName(headers)).toBe('pull_request');
    expect(provider.deliveryId({})).toBeNull();
    expect(provider.eventName({})).toBeNull();
  });
});

describe('forgejo headers', () => {
  it('reads X-Forgejo-Signature before X-Gitea-Signature', async () => {
    const { headers, body } = delivery('forgejo');
    headers['x-gitea-signature'] = '0'.repeat(64);

    await expect(forgejo.verify(headers, body, SECRET)).resolves.toBe(true);
  });

  it('takes X-Gitea-Signature alone, as an older Forgejo sends it', async () => {
    const { headers, body } = delivery('forgejo');
    delete headers['x-forgejo-signature'];

    await expect(forgejo.verify(headers, body, SECRET)).resolves.toBe(true);
  });

  it('reads X-Forgejo-Event and X-Forgejo-Delivery before the X-Gitea ones', () => {
    const headers = {
      'x-forgejo-event': 'pull_request',
      'x-gitea-event': 'push',
      'x-forgejo-delivery': 'forgejo-id',
      'x-gitea-delivery': 'gitea-id',
    };

    expect(forgejo.eventName(headers)).toBe('pull_request');
    expect(forgejo.deliveryId(headers)).toBe('forgejo-id');
    expect(forgejo.deliveryId({ 'x-gitea-delivery': 'gitea-id' })).toBe('gitea-id');
  });

  it('is not a Gitea trigger’s header: Gitea reads X-Gitea-Signature only', async () => {
    const { headers, body } = delivery('forgejo');
    delete headers['x-gitea-signature'];

    await expect(gitea.verify(headers, body, SECRET)).resolves.toBe(false);
  });
});

describe.each([
  ['gitea', gitea],
  ['forgejo', forgejo],
] as const)('%s.parse', (_, provider) => {
  it('reads a push to a branch', () => {
    expect(provider.parse('push', fixture('gitea-push'))).toEqual({
      kind: 'push',
      ref: 'refs/heads/main',
      branch: 'main',
      tag: null,
      commit: '1f3e5d7c9b0a2f4e6d8c0b2a4f6e8d0c2b4a6f8e',
      deleted: false,
      pusher: 'alice',
      author: { name: 'Alice Example', email: 'alice@example.com' },
      changedFiles: ['web/cart.html', 'web/index.html', 'Dockerfile'],
      pullRequest: null,
      repositoryUrl: 'https://gitea.example.com/platform/webshop.git',
    });
  });

  it('reads a tag push, building the commit of head_commit rather than the tag object', () => {
    expect(provider.parse('push', fixture('gitea-push-tag'))).toMatchObject({
      kind: 'tag',
      ref: 'refs/tags/v2.0.0',
      tag: 'v2.0.0',
      branch: null,
      commit: '1f3e5d7c9b0a2f4e6d8c0b2a4f6e8d0c2b4a6f8e',
      changedFiles: null,
    });
  });

  it('ignores the create event of the same tag: its push is what builds', () => {
    expect(provider.parse('create', fixture('gitea-create-tag'))).toBeNull();
  });

  it.each([
    ['opened', 'gitea-pull-request-opened', '3c5e7a9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c'],
    ['synchronized', 'gitea-pull-request-synchronized', '9a8b7c6d5e4f30211f2e3d4c5b6a79880a1b2c3d'],
  ])('reads a pull_request %s', (action, name, sha) => {
    expect(provider.parse('pull_request', fixture(name))).toEqual({
      kind: 'pull_request',
      ref: 'refs/pull/12/head',
      branch: 'feature/vouchers',
      tag: null,
      commit: sha,
      deleted: false,
      pusher: 'bob',
      author: null,
      changedFiles: null,
      pullRequest: { number: 12, action, targetBranch: 'main' },
      repositoryUrl: 'https://gitea.example.com/platform/webshop.git',
    });
  });

  it('reads the pusher from username when login is missing', () => {
    const payload = fixture('gitea-push');
    delete payload.pusher.login;

    expect(provider.parse('push', payload)?.pusher).toBe('alice');
  });

  it('does not know the changed files when Gitea lists fewer commits than it pushed', () => {
    const payload = { ...fixture('gitea-push'), total_commits: 9 };

    expect(provider.parse('push', payload)?.changedFiles).toBeNull();
  });

  it('does not know the changed files of a commit whose lists are null', () => {
    const payload = fixture('gitea-push');
    payload.commits[1].modified = null;

    expect(provider.parse('push', payload)?.changedFiles).toBeNull();
  });

  it('reads a push with after all zeros as a deletion', () => {
    const payload = { ...fixture('gitea-push'), after: '0'.repeat(40), head_commit: null };

    expect(provider.parse('push', payload)).toMatchObject({ deleted: true, commit: null });
  });

  it.each(['delete', 'issues', 'release', 'pull_request_approved'])('ignores %s', (event) => {
    expect(provider.parse(event, fixture('gitea-push'))).toBeNull();
  });

  it.each([
    ['after is a number', 'push', { ...fixture('gitea-push'), after: 42 }, 'after'],
    ['the ref is missing', 'push', { ...fixture('gitea-push'), ref: null }, 'ref'],
    [
      'the pusher has no name',
      'push',
      { ...fixture('gitea-push'), pusher: { id: 5 } },
      'pusher.login',
    ],
    [
      'the head sha is short',
      'pull_request',
      (() => {
        const payload = fixture('gitea-pull-request-opened');
        payload.pull_request.head.sha = '3c5e7a9';
        return payload;
      })(),
      'pull_request.head.sha',
    ],
    [
      'number is missing',
      'pull_request',
      { ...fixture('gitea-pull-request-opened'), number: undefined },
      'number',
    ],
  ])('refuses a payload where %s', (_, event, payload, field) => {
    let error: unknown;
    try {
      provider.parse(event, payload);
    } catch (caught) {
      error = caught;
    }

    expect(error).toBeInstanceOf(PayloadError);
    expect((error as PayloadError).field).toBe(field);
  });
});
