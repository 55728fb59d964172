import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { TriggerWorker } from '../src/triggers/trigger-worker.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeGitHost, type GitHostKind } from './support/fake-git-hosts.js';
import { FakeRunner } from './support/fake-runner.js';
import { FakeVault } from './support/fake-vault.js';
import { pushPayload, signedDelivery } from './support/git-providers.js';
import { scrape, sumOf } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const PUBLIC_URL = 'https://kiln.example.com';
const sha = (): string => randomBytes(20).toString('hex');

/** What each host calls the states kiln posts, in the order a build goes through them. */
const WORDS: Record<GitHostKind, Record<'pending' | 'success' | 'failure' | 'error', string>> = {
  github: { pending: 'pending', success: 'success', failure: 'failure', error: 'error' },
  gitlab: { pending: 'pending', success: 'success', failure: 'failed', error: 'canceled' },
  gitea: { pending: 'pending', success: 'success', failure: 'failure', error: 'error' },
  forgejo: { pending: 'pending', success: 'success', failure: 'failure', error: 'error' },
};

describe('commit statuses of builds made by triggers', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-status-');
  let kiln: TestApp;
  let seeded: Seeded;
  let runner: FakeRunner;
  let admin: ApiClient;
  let vault: FakeVault;
  const hosts = new Map<GitHostKind, FakeGitHost>();
  const TOKENS: Record<GitHostKind, string> = {
    github: `ghp_${randomBytes(12).toString('hex')}`,
    gitlab: `glpat-${randomBytes(12).toString('hex')}`,
    gitea: randomBytes(20).toString('hex'),
    forgejo: randomBytes(20).toString('hex'),
  };

  beforeAll(async () => {
    vault = await FakeVault.start();
    for (const provider of ['github', 'gitlab', 'gitea'] as const) {
      hosts.set(provider, await FakeGitHost.start({ provider, token: TOKENS[provider] }));
      vault.put('kv', `ci/${provider}`, { token: TOKENS[provider] });
    }
    kiln = await startTestApp({
      runner: FakeRunner,
      env: {
        KILN_PUBLIC_URL: PUBLIC_URL,
        KILN_TRIGGER_WORK_INTERVAL_MS: '100',
        KILN_EXTERNAL_TIMEOUT_MS: '1000',
      },
    });
    seeded = await seedTenancy(kiln);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const vaultToken = `hvs.${randomBytes(12).toString('hex')}`;
    vault.addToken(vaultToken, { policies: ['kv/'] });
    const tokenFile = join(dataDir, 'vault-token');
    writeFileSync(tokenFile, vaultToken);
    await new IntegrationsService(new IntegrationsRepository(kiln.dataSource)).setSecretManager(
      seeded.tenantA,
      'vault',
      { address: vault.url, auth: { method: 'token', tokenFile } },
    );
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await Promise.all([vault?.stop(), ...[...hosts.values()].map((host) => host.close())]);
    await rm(dataDir, { recursive: true, force: true });
  });

  let names = 0;
  async function triggerFor(
    provider: GitHostKind,
    token = `vault:kv/data/ci/${provider}#token`,
  ): Promise<{ id: string; secret: string }> {
    const host = hosts.get(provider)!;
    const response = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
      name: `status-${++names}`,
      provider,
      status: {
        api_url: host.url,
        repository: provider === 'gitlab' ? 'acme/web' : 'acme/web',
        token,
      },
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { id: string; secret: string };
  }

  /** Pushes a new commit to main and answers the build the trigger made of it. */
  async function pushed(provider: GitHostKind, trigger: { id: string; secret: string }) {
    const after = sha();
    const delivery = signedDelivery(
      provider,
      trigger.secret,
      provider === 'gitlab' ? 'Push Hook' : 'push',
      pushPayload(provider, {
        ref: 'refs/heads/main',
        after,
        pusher: 'ada',
        author: { name: 'Ada', email: 'ada@example.com' },
      }),
    );
    const response = await fetch(`${kiln.baseUrl}/api/v1/hooks/${trigger.id}`, {
      method: 'POST',
      headers: delivery.headers,
      body: new Uint8Array(delivery.body),
    });
    expect(response.status).toBe(202);
    const buildId = await eventually(async () => {
      const { deliveries } = (await (
        await admin.request('GET', `/triggers/${trigger.id}/deliveries`)
      ).json()) as { deliveries: Array<{ build_id: string | null }> };
      return deliveries[0]?.build_id ?? undefined;
    });
    return { sha: after, buildId: buildId! };
  }

  async function eventually<T>(
    read: () => Promise<T | undefined> | T | undefined,
    done: (value: T) => boolean = () => true,
    timeoutMs = 30_000,
  ): Promise<T | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (value !== undefined && done(value)) return value;
      if (Date.now() > deadline) return value;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  const statesOf = (provider: GitHostKind, commit: string) =>
    hosts
      .get(provider)!
      .statuses(commit)
      .map((status) => status.state);

  async function logOf(buildId: string): Promise<string[]> {
    const response = await admin.request('GET', `/builds/${buildId}/logs?limit=1000`);
    const body = (await response.json()) as { logs: Array<{ message: string }> };
    return body.logs.map((line) => line.message);
  }

  it('posts pending, then running, then success to GitHub, linking the build', async () => {
    const trigger = await triggerFor('github');
    const { sha: commit, buildId } = await pushed('github', trigger);

    await eventually(
      () => Promise.resolve(hosts.get('github')!.statuses(commit)),
      (statuses) => statuses.some((status) => status.description?.includes('running') === true),
    );
    await runner.succeed(buildId);
    await eventually(
      () => statesOf('github', commit),
      (states) => states.at(-1) === 'success',
    );

    const statuses = hosts.get('github')!.statuses(commit);
    // A pass may find the build queued before its start (pending, waiting), then started
    // (pending, "running": GitHub has no running state), then succeeded; never anything else.
    const states = statuses.map((status) => status.state);
    expect(states.at(-1)).toBe('success');
    expect(new Set(states.slice(0, -1))).toEqual(new Set(['pending']));
    expect(states.length).toBeLessThanOrEqual(3);
    expect(statuses.at(-2)!.description).toContain('running');
    expect(statuses.every((status) => status.targetUrl === `${PUBLIC_URL}/builds/${buildId}`)).toBe(
      true,
    );
    expect(statuses.every((status) => status.context === 'kiln')).toBe(true);
    const sent = hosts.get('github')!.received.filter((request) => request.path.includes(commit));
    expect(
      sent.every((request) => request.headers.authorization === `Bearer ${TOKENS.github}`),
    ).toBe(true);
  });

  it('posts running, then failed to GitLab when the build fails', async () => {
    const trigger = await triggerFor('gitlab');
    const { sha: commit, buildId } = await pushed('gitlab', trigger);

    await eventually(
      () => statesOf('gitlab', commit),
      (states) => states.includes('running'),
    );
    await runner.fail(buildId);
    await eventually(
      () => statesOf('gitlab', commit),
      (states) => states.at(-1) === 'failed',
    );

    // Running, then failed; a pass that found the build queued before its start posted pending
    // first.
    expect(statesOf('gitlab', commit)).toEqual(
      expect.arrayContaining(['running', WORDS.gitlab.failure]),
    );
    expect(statesOf('gitlab', commit).slice(-2)).toEqual(['running', WORDS.gitlab.failure]);
    expect(['pending', 'running']).toContain(statesOf('gitlab', commit)[0]);
    expect(statesOf('gitlab', commit).length).toBeLessThanOrEqual(3);
    const build = (await (await admin.request('GET', `/builds/${buildId}`)).json()) as {
      status: string;
    };
    expect(build.status).toBe('failed');
  });

  it('posts error to Gitea when the build is cancelled', async () => {
    const trigger = await triggerFor('gitea');
    const { sha: commit, buildId } = await pushed('gitea', trigger);

    await eventually(
      () => statesOf('gitea', commit),
      (states) => states.length >= 1,
    );
    expect((await admin.request('POST', `/builds/${buildId}/cancel`, {})).status).toBe(200);
    await eventually(
      () => statesOf('gitea', commit),
      (states) => states.at(-1) === 'error',
    );

    expect(statesOf('gitea', commit).at(-1)).toBe(WORDS.gitea.error);
  });

  it('retries while the host is down, says so in the build log, and posts once it is back', async () => {
    const github = hosts.get('github')!;
    const trigger = await triggerFor('github');
    github.down();
    try {
      const { sha: commit, buildId } = await pushed('github', trigger);
      await runner.succeed(buildId);
      const lines = await eventually(
        () => logOf(buildId),
        (log) => log.some((line) => line.includes('could not be posted')),
      );
      expect(lines!.find((line) => line.includes('could not be posted'))).toMatch(
        /\[kiln\] commit status \w+ could not be posted to 127\.0\.0\.1:\d+: .*; retrying in \d+ ?s/,
      );
      expect(statesOf('github', commit)).toEqual([]);

      github.up();
      // The first retries come after 2, then 4 seconds: the success arrives within a few.
      await kiln.app.get(TriggerWorker).runPass();
      await eventually(
        () => statesOf('github', commit),
        (states) => states.at(-1) === 'success',
      );
      expect(statesOf('github', commit).at(-1)).toBe('success');
      const build = (await (await admin.request('GET', `/builds/${buildId}`)).json()) as {
        status: string;
      };
      expect(build.status).toBe('success');
      expect((await logOf(buildId)).join('\n')).not.toContain(TOKENS.github);
    } finally {
      github.up();
    }
  });

  it('gives up at once on a token the host refuses, in one log line, and the build is untouched', async () => {
    vault.put('kv', 'ci/github-revoked', { token: 'ghp_revoked' });
    const trigger = await triggerFor('github', 'vault:kv/data/ci/github-revoked#token');
    const { buildId } = await pushed('github', trigger);
    await runner.succeed(buildId);

    const lines = await eventually(
      () => logOf(buildId),
      (log) => log.filter((line) => line.includes('not retrying')).length >= 1,
    );
    await kiln.app.get(TriggerWorker).runPass();
    const refusals = (await logOf(buildId)).filter((line) => line.includes('commit status'));
    expect(lines!.some((line) => line.includes('not retrying'))).toBe(true);
    // One line per state given up (pending, running, success: which of the first two a pass
    // saw depends on when it ran), each saying so, never a loop of retries.
    const givenUp = refusals.map(
      (line) => /commit status (\w+) could not be posted/.exec(line)?.[1],
    );
    expect(new Set(givenUp).size).toBe(givenUp.length);
    expect(givenUp).toContain('success');
    expect(refusals.every((line) => line.includes('not retrying'))).toBe(true);
    expect(refusals.join('\n')).not.toContain('ghp_revoked');
    const metrics = await scrape(`${kiln.baseUrl}/metrics`);
    expect(sumOf(metrics, 'kiln_commit_status_posts_total', { result: 'gave_up' })).toBeGreaterThan(
      0,
    );
    expect(sumOf(metrics, 'kiln_commit_status_posts_total', { result: 'retry' })).toBeGreaterThan(
      0,
    );
    expect(
      sumOf(metrics, 'kiln_commit_status_posts_total', { provider: 'github', result: 'posted' }),
    ).toBeGreaterThan(0);
    const build = (await (await admin.request('GET', `/builds/${buildId}`)).json()) as {
      status: string;
    };
    expect(build.status).toBe('success');
  });
});
