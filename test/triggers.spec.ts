import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { BuildRunner } from '../src/runners/build-runner.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { TriggerWorker } from '../src/triggers/trigger-worker.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import {
  pingPayload,
  pullRequestPayload,
  pushPayload,
  signedDelivery,
} from './support/git-providers.js';
import { scrape, sumOf } from './support/prometheus-text.js';
import { awayFromWindowEnd } from './support/rate-limit-window.js';
import { startTestApp, type TestApp } from './support/test-app.js';

type Provider = 'github' | 'gitlab' | 'gitea' | 'forgejo';

const sha = (): string => randomBytes(20).toString('hex');
const AUTHOR = { name: 'Ada Lovelace', email: 'ada@example.com' };

describe('builds from git pushes (webhooks)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let runner: FakeRunner;
  let admin: ApiClient;
  let developer: ApiClient;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: {
        KILN_WEBHOOK_MAX_BODY_BYTES: String(256 * 1024),
        KILN_WEBHOOK_RATE_LIMIT: '40',
        KILN_PUBLIC_URL: 'https://kiln.example.com',
        KILN_TRIGGER_WORK_INTERVAL_MS: '200',
      },
    });
    seeded = await seedTenancy(kiln);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    developer = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.developer.email),
      seeded.tenantA,
    );
  });

  afterAll(async () => {
    await kiln.close();
  });

  let names = 0;
  async function createTrigger(
    body: Record<string, unknown> = {},
  ): Promise<{ id: string; secret: string; webhook_url: string; [key: string]: unknown }> {
    const response = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
      name: `trigger-${++names}`,
      provider: 'github',
      ...body,
    });
    if (response.status !== 201) {
      throw new Error(`trigger create gave ${response.status}: ${await response.text()}`);
    }
    return (await response.json()) as { id: string; secret: string; webhook_url: string };
  }

  function deliver(
    triggerId: string,
    delivery: { headers: Record<string, string>; body: Buffer },
  ): Promise<Response> {
    return fetch(`${kiln.baseUrl}/api/v1/hooks/${triggerId}`, {
      method: 'POST',
      headers: delivery.headers,
      body: new Uint8Array(delivery.body),
    });
  }

  async function push(
    trigger: { id: string; secret: string },
    options: { provider?: Provider; ref?: string; after?: string; files?: string[] } = {},
  ): Promise<{ response: Response; after: string }> {
    const provider = options.provider ?? 'github';
    const after = options.after ?? sha();
    const payload = pushPayload(provider, {
      ref: options.ref ?? 'refs/heads/main',
      after,
      pusher: 'ada',
      author: AUTHOR,
      ...(options.files === undefined ? {} : { files: [{ modified: options.files }] }),
    });
    const response = await deliver(
      trigger.id,
      signedDelivery(provider, trigger.secret, eventOf(provider), payload),
    );
    return { response, after };
  }

  function eventOf(provider: Provider): string {
    return provider === 'gitlab' ? 'Push Hook' : 'push';
  }

  /** The trigger's deliveries once none is pending any more. */
  async function settled(triggerId: string): Promise<Array<Record<string, any>>> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const response = await admin.request('GET', `/triggers/${triggerId}/deliveries`);
      expect(response.status).toBe(200);
      const { deliveries } = (await response.json()) as { deliveries: Array<Record<string, any>> };
      if (deliveries.every((delivery) => delivery.outcome !== 'pending')) return deliveries;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('deliveries stayed pending');
  }

  async function buildsOf(triggerId: string): Promise<Array<Record<string, any>>> {
    const response = await admin.request('GET', `/builds?project_id=${seeded.projectA}&limit=100`);
    const { builds } = (await response.json()) as { builds: Array<{ id: string }> };
    const full = await Promise.all(
      builds.map(async (build) => (await admin.request('GET', `/builds/${build.id}`)).json()),
    );
    return (full as Array<Record<string, any>>).filter((build) => build.trigger?.id === triggerId);
  }

  async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
    let value = await read();
    for (let attempt = 0; attempt < 200 && !done(value); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      value = await read();
    }
    return value;
  }

  describe('the admin API', () => {
    it('creates a trigger with defaults, shows its secret once and its webhook URL', async () => {
      const created = await createTrigger();

      expect(created).toMatchObject({
        provider: 'github',
        events: ['push'],
        branches: ['**'],
        tags: ['**'],
        paths: [],
        build: { form: 'reference', build_args: null },
        start: true,
        concurrency: 'parallel',
        poll_interval_seconds: null,
        status: null,
        enabled: true,
        webhook_url: `https://kiln.example.com/api/v1/hooks/${created.id}`,
      });
      expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const read = (await (await admin.request('GET', `/triggers/${created.id}`)).json()) as object;
      expect(read).not.toHaveProperty('secret');
      const listed = (await (
        await admin.request('GET', `/projects/${seeded.projectA}/triggers`)
      ).json()) as { triggers: Array<{ id: string }> };
      expect(listed.triggers.map((t) => t.id)).toContain(created.id);
    });

    it('refuses a trigger that cannot work, naming every problem, and creates nothing', async () => {
      const before = await (
        await admin.request('GET', `/projects/${seeded.projectA}/triggers`)
      ).json();
      const response = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
        name: 'bad one',
        provider: 'github',
        branches: ['[unclosed'],
        start: false,
        concurrency: 'serial',
        status: { api_url: 'https://api.github.com', repository: 'acme/web', token: 'ghp_plain' },
      });

      expect(response.status).toBe(400);
      const body = (await response.json()) as { code: string; details: Record<string, string> };
      expect(body.code).toBe('INVALID_REQUEST');
      expect(Object.keys(body.details).sort()).toEqual(['branches', 'concurrency', 'status.token']);
      expect(
        await (await admin.request('GET', `/projects/${seeded.projectA}/triggers`)).json(),
      ).toEqual(before);
    });

    it('refuses a stored manifest that is not valid, naming its fields under build.manifest', async () => {
      const response = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
        name: 'bad manifest',
        provider: 'github',
        build: { form: 'manifest', manifest: { ...wizardManifest('kaniko'), tags: [42] } },
      });

      expect(response.status).toBe(400);
      const { details } = (await response.json()) as { details: Record<string, string> };
      expect(Object.keys(details).sort()).toEqual(['build.manifest.tags', 'build.manifest.tags.0']);
    });

    it('refuses polling for a project without a repository', async () => {
      const bare = await kiln.app.get(ProjectsService).create(seeded.tenantA, 'no-repo');
      const response = await admin.request('POST', `/projects/${bare.id}/triggers`, {
        name: 'poller',
        provider: 'gitea',
        poll_interval_seconds: 60,
      });

      expect(response.status).toBe(400);
      expect(((await response.json()) as { details: object }).details).toHaveProperty(
        'poll_interval_seconds',
      );
    });

    it('refuses a second trigger of the same name in a project with 409', async () => {
      const first = await createTrigger();
      const response = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
        name: first.name,
        provider: 'gitlab',
      });

      expect(response.status).toBe(409);
    });

    it('rotates the secret: deliveries signed with the old one are refused', async () => {
      const trigger = await createTrigger();
      const rotated = (await (
        await admin.request('POST', `/triggers/${trigger.id}/secret`)
      ).json()) as { secret: string };

      expect(rotated.secret).not.toBe(trigger.secret);
      expect((await push(trigger)).response.status).toBe(401);
      expect((await push({ id: trigger.id, secret: rotated.secret })).response.status).toBe(202);
    });

    it('keeps triggers to the tenant admins', async () => {
      const trigger = await createTrigger();

      expect((await developer.request('GET', `/triggers/${trigger.id}`)).status).toBe(403);
      expect(
        (
          await developer.request('POST', `/projects/${seeded.projectA}/triggers`, {
            name: 'x',
            provider: 'github',
          })
        ).status,
      ).toBe(403);
    });
  });

  describe('deliveries', () => {
    it('builds a signed GitHub push at its commit, recording the trigger, event, pusher and author', async () => {
      const trigger = await createTrigger();
      const { response, after } = await push(trigger);

      expect(response.status).toBe(202);
      const answered = (await response.json()) as { delivery: { outcome: string } };
      expect(answered.delivery.outcome).toBe('pending');
      const [delivery] = await settled(trigger.id);
      expect(delivery).toMatchObject({
        outcome: 'built',
        event: 'push',
        commit: after,
        pusher: 'ada',
      });
      const build = (await (
        await admin.request('GET', `/builds/${delivery!.build_id}`)
      ).json()) as Record<string, any>;
      expect(build).toMatchObject({
        git_branch: 'main',
        git_commit: after,
        git_author_name: AUTHOR.name,
        git_author_email: AUTHOR.email,
        status: 'in_progress',
        trigger: { id: trigger.id, event: 'push', pusher: 'ada' },
      });
      expect(runner.started).toContain(build.id);
    });

    it.each(['gitlab', 'gitea', 'forgejo'] as const)(
      'builds a signed %s push',
      async (provider) => {
        const trigger = await createTrigger({ provider });
        const { response, after } = await push(trigger, { provider });

        expect(response.status).toBe(202);
        const [delivery] = await settled(trigger.id);
        expect(delivery).toMatchObject({ outcome: 'built', commit: after });
      },
    );

    it('builds a stored manifest at the pushed branch and commit', async () => {
      const trigger = await createTrigger({
        build: { form: 'manifest', manifest: wizardManifest('buildx') },
      });
      const { after } = await push(trigger);

      const [delivery] = await settled(trigger.id);
      expect(delivery).toMatchObject({ outcome: 'built' });
      const spec = runner.specs.get(delivery!.build_id)!;
      expect(spec).toMatchObject({
        method: 'buildx',
        source: { branch: 'main', commit: after },
      });
    });

    it('answers a replayed delivery with 200 and builds nothing twice', async () => {
      const trigger = await createTrigger();
      const payload = pushPayload('github', {
        ref: 'refs/heads/main',
        after: sha(),
        pusher: 'ada',
        author: AUTHOR,
      });
      const delivery = signedDelivery('github', trigger.secret, 'push', payload, {
        deliveryId: 'replayed-1',
      });

      expect((await deliver(trigger.id, delivery)).status).toBe(202);
      await settled(trigger.id);
      const again = await deliver(trigger.id, delivery);

      expect(again.status).toBe(200);
      expect(((await again.json()) as { delivery: { outcome: string } }).delivery.outcome).toBe(
        'duplicate',
      );
      expect(await buildsOf(trigger.id)).toHaveLength(1);
    });

    it('answers a ping with a pong and builds nothing', async () => {
      const trigger = await createTrigger();
      const response = await deliver(
        trigger.id,
        signedDelivery('github', trigger.secret, 'ping', pingPayload()),
      );

      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ pong: true });
      expect(await buildsOf(trigger.id)).toHaveLength(0);
    });

    describe('refusals, which create nothing', () => {
      let trigger: { id: string; secret: string };
      let unsigned: { headers: Record<string, string>; body: Buffer };

      beforeAll(async () => {
        trigger = await createTrigger();
        unsigned = signedDelivery(
          'github',
          trigger.secret,
          'push',
          pushPayload('github', {
            ref: 'refs/heads/main',
            after: sha(),
            pusher: 'mallory',
            author: AUTHOR,
          }),
        );
      });

      afterEach(async () => {
        expect(await buildsOf(trigger.id)).toHaveLength(0);
      });

      async function refusal(response: Response): Promise<{ status: number; error: string }> {
        const body = (await response.json()) as { error: string };
        return { status: response.status, error: body.error };
      }

      const UNVERIFIED = { status: 401, error: 'Webhook signature could not be verified' };

      it('refuses a wrong signature', async () => {
        const forged = signedDelivery(
          'github',
          'not the secret',
          'push',
          JSON.parse(unsigned.body.toString()),
        );
        expect(await refusal(await deliver(trigger.id, forged))).toEqual(UNVERIFIED);
      });

      it('refuses a missing signature', async () => {
        const missing = Object.fromEntries(
          Object.entries(unsigned.headers).filter(
            ([name]) => name.toLowerCase() !== 'x-hub-signature-256',
          ),
        );
        expect(
          await refusal(await deliver(trigger.id, { headers: missing, body: unsigned.body })),
        ).toEqual(UNVERIFIED);
      });

      it('refuses a body changed after signing', async () => {
        const changed = Buffer.from(unsigned.body.toString().replace('mallory', 'mallorx'));
        expect(
          await refusal(await deliver(trigger.id, { headers: unsigned.headers, body: changed })),
        ).toEqual(UNVERIFIED);
      });

      it('answers an unknown trigger exactly as a wrong signature', async () => {
        expect(
          await refusal(await deliver('00000000-0000-4000-8000-000000000000', unsigned)),
        ).toEqual(UNVERIFIED);
        expect(await refusal(await deliver('not-a-uuid', unsigned))).toEqual(UNVERIFIED);
      });

      it('refuses a body over the limit with 413 without reading it', async () => {
        const huge = Buffer.alloc(512 * 1024, 0x20);
        const response = await deliver(trigger.id, { headers: unsigned.headers, body: huge });
        expect(response.status).toBe(413);
      });

      it('refuses a signed JSON bomb with 400', async () => {
        const bomb = Buffer.from(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
        const { headers } = signedDelivery('github', trigger.secret, 'push', {});
        const resigned = resign(headers, trigger.secret, bomb);
        const response = await deliver(trigger.id, { headers: resigned, body: bomb });
        expect(response.status).toBe(400);
      });

      it('refuses a signed payload that does not fit its schema with 400', async () => {
        const bad = signedDelivery('github', trigger.secret, 'push', { ref: 42, after: 'nope' });
        const response = await deliver(trigger.id, bad);
        expect(response.status).toBe(400);
      });

      it('lists the refusals of a real trigger for its admins', async () => {
        const deliveries = await settled(trigger.id);
        expect(deliveries.some((d) => d.outcome === 'refused')).toBe(true);
        expect(deliveries.every((d) => d.build_id === null)).toBe(true);
      });
    });

    it('refuses deliveries to a disabled trigger as if it did not exist', async () => {
      const trigger = await createTrigger();
      await admin.request('PATCH', `/triggers/${trigger.id}`, { enabled: false });

      expect((await push(trigger)).response.status).toBe(401);
    });

    it('limits deliveries per trigger', async () => {
      const trigger = await createTrigger({ branches: ['nothing-matches'] });
      const statuses: number[] = [];
      for (let i = 0; i < 42; i++) statuses.push((await push(trigger)).response.status);

      expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(0);
      expect(statuses.filter((status) => status === 202).length).toBeLessThanOrEqual(40);
    });
  });

  describe('filters', () => {
    it('passes by a branch no pattern matches, saying why', async () => {
      const trigger = await createTrigger({ branches: ['main', 'release/*'] });
      await push(trigger, { ref: 'refs/heads/feature/x' });
      const releases = await push(trigger, { ref: 'refs/heads/release/1.2' });

      const deliveries = await settled(trigger.id);
      expect(deliveries.find((d) => d.ref === 'refs/heads/feature/x')).toMatchObject({
        outcome: 'filtered',
        build_id: null,
      });
      expect(deliveries.find((d) => d.ref === 'refs/heads/feature/x')!.detail).toContain(
        'feature/x',
      );
      expect(deliveries.find((d) => d.commit === releases.after)).toMatchObject({
        outcome: 'built',
      });
    });

    it('builds tags that match its tag patterns, at the tag', async () => {
      const trigger = await createTrigger({ events: ['tag'], tags: ['v*'] });
      const tagged = await push(trigger, { ref: 'refs/tags/v1.2.0' });
      await push(trigger, { ref: 'refs/tags/nightly' });
      await push(trigger, { ref: 'refs/heads/main' });

      const deliveries = await settled(trigger.id);
      expect(deliveries.filter((d) => d.outcome === 'built')).toHaveLength(1);
      const build = (await (
        await admin.request(
          'GET',
          `/builds/${deliveries.find((d) => d.outcome === 'built')!.build_id}`,
        )
      ).json()) as Record<string, any>;
      expect(build).toMatchObject({
        git_branch: 'v1.2.0',
        git_commit: tagged.after,
        trigger: { event: 'tag' },
      });
    });

    it('builds a push only when a changed file matches its paths', async () => {
      const trigger = await createTrigger({ paths: ['services/api/**'] });
      await push(trigger, { files: ['docs/readme.md'] });
      const api = await push(trigger, { files: ['services/api/main.go'] });

      const deliveries = await settled(trigger.id);
      expect(deliveries.find((d) => d.commit === api.after)).toMatchObject({ outcome: 'built' });
      expect(deliveries.filter((d) => d.outcome === 'filtered')).toHaveLength(1);
    });

    it('builds a pull request opened or synchronized against a matching branch, not one closed', async () => {
      const trigger = await createTrigger({ events: ['pull_request'], branches: ['main'] });
      const head = sha();
      const send = (action: string) =>
        deliver(
          trigger.id,
          signedDelivery(
            'github',
            trigger.secret,
            'pull_request',
            pullRequestPayload('github', {
              action,
              number: 7,
              headRef: 'feature/login',
              headSha: action === 'closed' ? sha() : head,
              baseRef: 'main',
              sender: 'grace',
            }),
          ),
        );

      expect((await send('opened')).status).toBe(202);
      expect((await send('closed')).status).toBe(202);
      const deliveries = await settled(trigger.id);
      expect(deliveries.map((d) => d.outcome).sort()).toEqual(['built', 'filtered']);
      const built = deliveries.find((d) => d.outcome === 'built')!;
      const build = (await (
        await admin.request('GET', `/builds/${built.build_id}`)
      ).json()) as Record<string, any>;
      expect(build).toMatchObject({
        git_branch: 'feature/login',
        git_commit: head,
        trigger: { event: 'pull_request', pusher: 'grace' },
      });
    });
  });

  it('counts deliveries by provider and outcome in kiln_trigger_deliveries_total', async () => {
    const trigger = await createTrigger({ branches: ['main'] });
    const before = await scrape(`${kiln.baseUrl}/metrics`);
    await push(trigger);
    await push(trigger, { ref: 'refs/heads/elsewhere' });
    await push({ id: trigger.id, secret: 'not the secret' });
    await settled(trigger.id);

    const after = await scrape(`${kiln.baseUrl}/metrics`);
    const moved = (outcome: string) =>
      sumOf(after, 'kiln_trigger_deliveries_total', { provider: 'github', outcome }) -
      sumOf(before, 'kiln_trigger_deliveries_total', { provider: 'github', outcome });
    expect({
      built: moved('built'),
      filtered: moved('filtered'),
      refused: moved('refused'),
    }).toEqual({ built: 1, filtered: 1, refused: 1 });
  });

  describe('concurrency', () => {
    it('latest-only: three quick pushes end with one running build of the last commit, the others cancelled', async () => {
      const trigger = await createTrigger({ concurrency: 'latest-only', branches: ['main'] });
      const commits: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { response, after } = await push(trigger);
        expect(response.status).toBe(202);
        commits.push(after);
      }
      await settled(trigger.id);

      const builds = await eventually(
        () => buildsOf(trigger.id),
        (list) => list.filter((b) => b.status === 'in_progress').length === 1 && list.length === 3,
      );
      const byCommit = Object.fromEntries(builds.map((b) => [b.git_commit, b.status]));
      const newest = builds.reduce((a, b) => (a.build_number > b.build_number ? a : b));
      expect(newest.status).toBe('in_progress');
      expect(Object.values(byCommit).sort()).toEqual(['cancelled', 'cancelled', 'in_progress']);
      expect(
        builds
          .filter((b) => b.status === 'cancelled')
          .every((b) => b.build_number < newest.build_number),
      ).toBe(true);
    });

    it('serial: the next build of a branch starts when the one before it ends', async () => {
      const trigger = await createTrigger({ concurrency: 'serial', branches: ['main'] });
      const first = await push(trigger);
      await settled(trigger.id);
      const second = await push(trigger);
      await settled(trigger.id);

      let builds = await buildsOf(trigger.id);
      const status = (commit: string) => builds.find((b) => b.git_commit === commit)?.status;
      expect(status(first.after)).toBe('in_progress');
      expect(status(second.after)).toBe('queued');

      await runner.succeed(builds.find((b) => b.git_commit === first.after)!.id);
      builds = await eventually(
        () => buildsOf(trigger.id),
        (list) => list.find((b) => b.git_commit === second.after)?.status === 'in_progress',
      );
      expect(status(second.after)).toBe('in_progress');
    });

    it('start: false leaves the build queued for a person to start', async () => {
      const trigger = await createTrigger({ start: false });
      await push(trigger);
      const [delivery] = await settled(trigger.id);
      await kiln.app.get(TriggerWorker).runPass();

      const build = (await (
        await admin.request('GET', `/builds/${delivery!.build_id}`)
      ).json()) as { status: string };
      expect(build.status).toBe('queued');
    });
  });
});

/** GitHub's signature of other bytes than the payload builder made (a hand-made body). */
function resign(
  headers: Record<string, string>,
  secret: string,
  body: Buffer,
): Record<string, string> {
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) =>
      name.toLowerCase() === 'x-hub-signature-256' ? [name, signature] : [name, value],
    ),
  );
}

describe('unverified deliveries', () => {
  /** KILN_RATE_LIMIT_WINDOW_SECONDS' most: a window's end falls inside the test rarely. */
  const WINDOW_SECONDS = 3600;
  let kiln: TestApp;
  let seeded: Seeded;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: {
        KILN_RATE_LIMIT_WRITES: '5',
        KILN_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
      },
    });
    seeded = await seedTenancy(kiln);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it("count against the sender's address alike for an unknown trigger and a wrong signature; verified ones do not", async () => {
    // A sign-in and refusals on both sides of a window's end would be counted apart (one more
    // refusal answered 401).
    await awayFromWindowEnd(WINDOW_SECONDS, 20_000);
    const admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const created = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
      name: 'known',
      provider: 'github',
    });
    const trigger = (await created.json()) as { id: string; secret: string };
    const payload = () =>
      pushPayload('github', {
        ref: 'refs/heads/main',
        after: sha(),
        pusher: 'mallory',
        author: AUTHOR,
      });
    const send = async (id: string, secret: string) => {
      const { headers, body } = signedDelivery('github', secret, 'push', payload());
      const response = await fetch(`${kiln.baseUrl}/api/v1/hooks/${id}`, {
        method: 'POST',
        headers,
        body: new Uint8Array(body),
      });
      return response.status;
    };
    const unknown = () => send(randomUUID(), 'anything');
    const forged = () => send(trigger.id, 'not the secret');

    const answers = [
      await unknown(),
      await forged(),
      await unknown(),
      await forged(),
      await unknown(),
      await forged(),
      await unknown(),
    ];

    // The address's budget of 5 writes: the sign-in above spent one, the first four refusals
    // the rest.
    expect(answers).toEqual([401, 401, 401, 401, 429, 429, 429]);
    expect(await send(trigger.id, trigger.secret)).toBe(202);
  }, 60_000);
});
