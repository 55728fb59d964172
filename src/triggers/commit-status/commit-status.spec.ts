import { randomBytes } from 'node:crypto';
import { type CommitState, type GitProvider, posterFor, StatusPostError } from './commit-status.js';
import { FakeGitHost, fakeToken } from '../../../test/support/fake-git-hosts.js';

const STATES: Record<GitProvider, Record<CommitState, string>> = {
  github: {
    pending: 'pending',
    running: 'pending',
    success: 'success',
    failure: 'failure',
    error: 'error',
  },
  gitlab: {
    pending: 'pending',
    running: 'running',
    success: 'success',
    failure: 'failed',
    error: 'canceled',
  },
  gitea: {
    pending: 'pending',
    running: 'pending',
    success: 'success',
    failure: 'failure',
    error: 'error',
  },
  forgejo: {
    pending: 'pending',
    running: 'pending',
    success: 'success',
    failure: 'failure',
    error: 'error',
  },
};

const LABELS: Record<GitProvider, string> = {
  github: 'GitHub',
  gitlab: 'GitLab',
  gitea: 'Gitea',
  forgejo: 'Forgejo',
};

const REPOSITORY: Record<GitProvider, string> = {
  github: 'acme/app',
  gitlab: 'acme/platform/app',
  gitea: 'acme/app',
  forgejo: 'acme/app',
};

const details = {
  targetUrl: 'https://kiln.example.com/builds/b1',
  description: 'Build #7 is running',
};

function sha(): string {
  return randomBytes(20).toString('hex');
}

async function failure(promise: Promise<unknown>): Promise<StatusPostError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StatusPostError) return error;
    throw error;
  }
  throw new Error('the post succeeded');
}

describe('CommitStatusPoster', () => {
  let host: FakeGitHost | undefined;

  afterEach(async () => {
    await host?.close();
    host = undefined;
  });

  describe.each(Object.keys(STATES) as GitProvider[])('%s', (provider) => {
    let token: string;
    let target: { apiUrl: string; repository: string; context: string };
    const poster = posterFor(provider, { timeoutMs: 2_000 });

    beforeEach(async () => {
      token = fakeToken(provider);
      host = await FakeGitHost.start({ provider, token, repositories: [REPOSITORY[provider]] });
      target = { apiUrl: host.url, repository: REPOSITORY[provider], context: 'kiln' };
    });

    it.each(Object.entries(STATES[provider]))(
      "posts kiln's %s as the provider's %s, with the context, target URL and description",
      async (state, expected) => {
        const commit = sha();
        await poster.post(target, token, commit, state as CommitState, details);
        expect(host!.statuses(commit)).toEqual([
          expect.objectContaining({
            repository: REPOSITORY[provider],
            state: expected,
            context: 'kiln',
            targetUrl: details.targetUrl,
            description: details.description,
          }),
        ]);
      },
    );

    it('accepts an API URL with a trailing slash', async () => {
      const commit = sha();
      await poster.post({ ...target, apiUrl: `${host!.url}/` }, token, commit, 'success', details);
      expect(host!.statuses(commit)).toHaveLength(1);
    });

    it('cuts a description longer than 140 characters', async () => {
      const commit = sha();
      await poster.post(target, token, commit, 'failure', {
        ...details,
        description: `Build #7 failed: ${'é'.repeat(200)}`,
      });
      const [posted] = host!.statuses(commit);
      expect(Array.from(posted!.description!)).toHaveLength(140);
      expect(posted!.description!.endsWith('…')).toBe(true);
    });

    it('gives up on a refused token at once: not retryable, the provider and reason named', async () => {
      const error = await failure(poster.post(target, 'not-the-token', sha(), 'pending', details));
      expect(error.status).toBe(401);
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(new RegExp(`^${LABELS[provider]} answered HTTP 401: \\S`));
      expect(error.message).not.toContain('not-the-token');
    });

    it('does not retry a repository the host does not know', async () => {
      const error = await failure(
        poster.post({ ...target, repository: 'acme/other' }, token, sha(), 'pending', details),
      );
      expect(error.status).toBe(404);
      expect(error.retryable).toBe(false);
      expect(error.message).toContain('Not Found');
    });

    it.each([500, 502, 503])('retries an HTTP %i answer', async (status) => {
      host!.failNext(1, status);
      const error = await failure(poster.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status, retryable: true });
      expect(error.message).toContain(`injected ${status}`);
    });

    it('retries a 429 after the time the host asks for', async () => {
      host!.failNext(1, 429, { 'retry-after': '7' });
      const error = await failure(poster.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 7_000 });
    });

    it('retries when the host closes the connection', async () => {
      host!.down();
      const error = await failure(poster.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status: null, retryable: true });
      expect(error.message).toMatch(new RegExp(`^${LABELS[provider]} could not be reached: `));
    });

    it('posts again once the host is back up', async () => {
      host!.down();
      await failure(poster.post(target, token, sha(), 'pending', details));
      host!.up();
      const commit = sha();
      await poster.post(target, token, commit, 'success', details);
      expect(host!.statuses(commit).map((s) => s.state)).toEqual([STATES[provider].success]);
    });

    it('retries a host that does not answer within the timeout', async () => {
      host!.hangNext(1);
      const quick = posterFor(provider, { timeoutMs: 200 });
      const error = await failure(quick.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status: null, retryable: true });
      expect(error.message).toBe(`${LABELS[provider]} did not answer within 200 ms`);
    });

    it("rejects with the caller's reason when the caller aborts", async () => {
      host!.hangNext(1);
      const controller = new AbortController();
      const posting = poster.post(target, token, sha(), 'pending', details, controller.signal);
      const reason = new Error('shutting down');
      setTimeout(() => controller.abort(reason), 50);
      await expect(posting).rejects.toBe(reason);
    });

    it('refuses an API URL that is not http(s) without sending anything', async () => {
      const error = await failure(
        poster.post({ ...target, apiUrl: 'ftp://example.com' }, token, sha(), 'pending', details),
      );
      expect(error.retryable).toBe(false);
      expect(host!.received).toHaveLength(0);
    });

    it('refuses an empty token without sending anything', async () => {
      const error = await failure(poster.post(target, '  ', sha(), 'pending', details));
      expect(error.retryable).toBe(false);
      expect(host!.received).toHaveLength(0);
    });
  });

  describe('github', () => {
    const token = fakeToken('github');
    const poster = posterFor('github', { timeoutMs: 2_000 });
    let target: { apiUrl: string; repository: string; context: string };

    beforeEach(async () => {
      host = await FakeGitHost.start({ provider: 'github', token });
      target = { apiUrl: host.url, repository: 'acme/app', context: 'kiln' };
    });

    it('sends the headers GitHub documents, the token as a bearer token', async () => {
      const commit = sha();
      await poster.post(target, token, commit, 'pending', details);
      const [received] = host!.received;
      expect(received).toMatchObject({
        method: 'POST',
        path: `/repos/acme/app/statuses/${commit}`,
        headers: expect.objectContaining({
          authorization: `Bearer ${token}`,
          accept: 'application/vnd.github+json',
          'x-github-api-version': '2022-11-28',
          'user-agent': 'kiln',
          'content-type': 'application/json',
        }),
        body: {
          state: 'pending',
          target_url: details.targetUrl,
          description: details.description,
          context: 'kiln',
        },
      });
    });

    it('refuses a repository that is not owner/name without sending anything', async () => {
      const error = await failure(
        poster.post({ ...target, repository: 'app' }, token, sha(), 'pending', details),
      );
      expect(error).toMatchObject({ status: null, retryable: false });
      expect(error.message).toBe('GitHub repository "app" is not owner/name');
      expect(host!.received).toHaveLength(0);
    });

    it('retries a 403 that is a rate limit, after its reset', async () => {
      const reset = Math.floor(Date.now() / 1000) + 60;
      host!.failNext(1, 403, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) });
      const error = await failure(poster.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status: 403, retryable: true });
      expect(error.retryAfterMs).toBeGreaterThan(50_000);
      expect(error.retryAfterMs).toBeLessThanOrEqual(60_000);
    });

    it('does not retry a 403 that is a refusal', async () => {
      host!.failNext(1, 403);
      const error = await failure(poster.post(target, token, sha(), 'pending', details));
      expect(error).toMatchObject({ status: 403, retryable: false, retryAfterMs: null });
    });

    it("names GitHub's validation errors", async () => {
      const error = await failure(poster.post(target, token, 'not-a-sha', 'pending', details));
      expect(error).toMatchObject({ status: 422, retryable: false });
      expect(error.message).toBe(
        'GitHub answered HTTP 422: Validation Failed: No commit found for SHA: not-a-sha',
      );
    });
  });

  describe('gitlab', () => {
    const token = fakeToken('gitlab');
    const poster = posterFor('gitlab', { timeoutMs: 2_000 });
    let target: { apiUrl: string; repository: string; context: string };

    beforeEach(async () => {
      host = await FakeGitHost.start({
        provider: 'gitlab',
        token,
        repositories: ['acme/platform/app', '42'],
      });
      target = { apiUrl: host.url, repository: 'acme/platform/app', context: 'kiln' };
    });

    it("sends the project's path URL-encoded and the token as PRIVATE-TOKEN", async () => {
      const commit = sha();
      await poster.post(target, token, commit, 'running', details);
      const [received] = host!.received;
      expect(received).toMatchObject({
        path: `/api/v4/projects/acme%2Fplatform%2Fapp/statuses/${commit}`,
        headers: expect.objectContaining({ 'private-token': token }),
        body: {
          state: 'running',
          name: 'kiln',
          target_url: details.targetUrl,
          description: details.description,
        },
      });
      expect(received!.headers.authorization).toBeUndefined();
    });

    it('addresses a project by its numeric id', async () => {
      const commit = sha();
      await poster.post({ ...target, repository: '42' }, token, commit, 'success', details);
      expect(host!.statuses(commit)).toEqual([
        expect.objectContaining({ repository: '42', state: 'success' }),
      ]);
    });

    it('takes a repeated post of the state GitLab already shows as posted', async () => {
      const commit = sha();
      await poster.post(target, token, commit, 'running', details);
      await poster.post(target, token, commit, 'running', details);
      expect(host!.statuses(commit).map((s) => s.state)).toEqual(['running']);
    });

    it("still reports GitLab's refusal of a move back from running to pending", async () => {
      const commit = sha();
      await poster.post(target, token, commit, 'running', details);
      const error = await failure(poster.post(target, token, commit, 'pending', details));
      expect(error).toMatchObject({ status: 400, retryable: false });
      expect(error.message).toContain('Cannot transition status via :enqueue from :running');
    });

    it('moves a status from pending through running to its end', async () => {
      const commit = sha();
      for (const state of ['pending', 'running', 'failure'] as const) {
        await poster.post(target, token, commit, state, details);
      }
      expect(host!.statuses(commit).map((s) => s.state)).toEqual(['pending', 'running', 'failed']);
    });
  });

  describe('gitea and forgejo', () => {
    it.each(['gitea', 'forgejo'] as const)('%s: sends the token as "token …"', async (provider) => {
      const token = fakeToken(provider);
      host = await FakeGitHost.start({ provider, token });
      const commit = sha();
      await posterFor(provider, { timeoutMs: 2_000 }).post(
        { apiUrl: host.url, repository: 'acme/app', context: 'kiln' },
        token,
        commit,
        'running',
        details,
      );
      expect(host.received[0]).toMatchObject({
        path: `/api/v1/repos/acme/app/statuses/${commit}`,
        headers: expect.objectContaining({ authorization: `token ${token}` }),
        body: {
          state: 'pending',
          context: 'kiln',
          target_url: details.targetUrl,
          description: details.description,
        },
      });
    });
  });
});
