import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Admission through the local runner (issue 30, docs/adr/0042-admission-in-postgres.md), with real
 * buildah, a real registry and two tenants: one slot, three builds; where a waiting build stands
 * and why; its log; the fair share; the timeout counted from admission; cancel of a waiting
 * build; the queue's time to live and the tenant's room to wait.
 */
jest.setTimeout(180_000);

const SLOW_DOCKERFILE = [
  'FROM scratch',
  'COPY busybox /bin/busybox',
  'RUN ["/bin/busybox", "sh", "-c", "echo sleeping && /bin/busybox sleep 120"]',
  '',
].join('\n');

describe('admission with the local runner (real buildah, real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-admission-');
  let registry: LocalRegistry;
  let repo: GitRepo;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    // Quick builds, one branch each: a project refuses a second waiting build of the same source.
    for (const branch of ['quick-1', 'quick-2', 'quick-3']) {
      repo.commit(branch, {
        'hello.txt': `hello from ${branch}\n`,
        Dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
      });
    }
    repo.commit('slow', { busybox: { copyFrom: '/bin/busybox' }, Dockerfile: SLOW_DOCKERFILE });
  });

  afterAll(async () => {
    await registry.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  /** The environment of a kiln `name` with the local runner, pushing to the test registry. */
  const localEnv = (name: string, env: Record<string, string>) => ({
    KILN_RUNNER: 'local',
    KILN_DATA_DIR: `${dataDir}/${name}`,
    KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
    KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
    ...env,
  });

  /** A kiln with `env`, both tenants' projects building from the test repository. */
  async function kilnWith(name: string, env: Record<string, string>, database?: TestDatabase) {
    const kiln = await startTestApp({
      ...(database === undefined ? {} : { database }),
      env: localEnv(name, {
        KILN_CANCEL_GRACE_SECONDS: '1',
        KILN_ADMISSION_POLL_MS: '100',
        ...env,
      }),
    });
    const seeded = await seedTenancy(kiln);
    await kiln.dataSource.query(
      'UPDATE projects SET git_repository_url = $1 WHERE id = ANY($2::uuid[])',
      [repo.url, [seeded.projectA, seeded.projectB]],
    );
    const a = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const b = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
    return { kiln, seeded, a, b };
  }

  async function ended(client: ApiClient, id: string, timeoutMs = 90_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const build = await jsonOf(await client.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  const messagesOf = async (client: ApiClient, id: string): Promise<string[]> =>
    (await jsonOf(await client.request('GET', `/builds/${id}/logs?limit=1000`))).logs.map(
      (line: any) => line.message,
    );

  describe('one slot (KILN_MAX_RUNNING=1), builds of two tenants, a 6 s build timeout', () => {
    let kiln: TestApp;
    let seeded: Seeded;
    let a: ApiClient;
    let b: ApiClient;

    beforeAll(async () => {
      ({ kiln, seeded, a, b } = await kilnWith('one-slot', {
        KILN_MAX_RUNNING: '1',
        KILN_BUILD_TIMEOUT_SECONDS: '6',
      }));
    });

    afterAll(async () => {
      await kiln.close();
    });

    async function start(client: ApiClient, projectId: string, branch: string) {
      const build = await client.createBuild(projectId, branch);
      const started = await client.request('POST', `/builds/${build.id}/start`);
      expect(started.status).toBe(200);
      return { id: build.id as string, answer: await jsonOf(started) };
    }

    it('runs one at a time, says where each waiting build stands and why, lets a waiting build be cancelled, and counts each timeout from admission', async () => {
      // Tenant B may run nothing for now (its own limit, 0): its build waits with TenantLimit.
      await kiln.dataSource.query(
        'INSERT INTO tenant_admission_settings (tenant_id, max_running) VALUES ($1, 0)',
        [seeded.tenantB],
      );
      const a1 = await start(a, seeded.projectA, 'slow');
      expect(a1.answer).toMatchObject({ status: 'in_progress' });
      expect(a1.answer.queue).toBeUndefined(); // admitted at once: the slot was free
      await until('a1 to run', async () =>
        (await messagesOf(a, a1.id)).some((line) => line.includes('sleeping')) ? true : undefined,
      );

      const b1 = await start(b, seeded.projectB, 'quick-1');
      const a2 = await start(a, seeded.projectA, 'quick-1');
      // The start answers in_progress, and where the build waits: admissible builds first.
      expect(a2.answer).toMatchObject({
        status: 'in_progress',
        queue: { position: 1, reason: 'InstallationLimit' },
      });
      const statusOf = async (client: ApiClient, id: string) =>
        jsonOf(await client.request('GET', `/builds/${id}/status`));
      expect(await statusOf(a, a2.id)).toEqual({
        build_id: a2.id,
        status: 'in_progress',
        progress: null,
        started_at: expect.any(String),
        estimated_completion: null,
        error: null,
        queue: {
          position: 1,
          reason: 'InstallationLimit',
          message: 'all 1 build slots of this installation are in use',
          estimated_start: null, // no build has run to its end here yet
        },
      });
      expect((await statusOf(b, b1.id)).queue).toEqual({
        position: 2,
        reason: 'TenantLimit',
        message:
          "this tenant's limit on running builds is 0: none runs until an administrator raises it",
        estimated_start: null,
      });
      const listed = await jsonOf(await a.request('GET', '/builds?status=in_progress'));
      expect(listed.builds.find((build: any) => build.id === a2.id).queue).toMatchObject({
        position: 1,
      });
      expect(listed.builds.find((build: any) => build.id === a1.id).queue).toBeUndefined();

      // A waiting build can be cancelled; it held nothing, so nothing else starts.
      const a3 = await start(a, seeded.projectA, 'quick-2');
      const cancelled = await a.request('POST', `/builds/${a3.id}/cancel`, { reason: 'not now' });
      expect(cancelled.status).toBe(200);
      expect(await jsonOf(cancelled)).toMatchObject({ status: 'cancelled' });
      expect((await statusOf(a, a2.id)).queue).toMatchObject({ position: 1 });

      // a1 runs into its 6 s timeout, counted from its admission; a2 runs next.
      expect(await ended(a, a1.id)).toMatchObject({ status: 'failed', failure_reason: 'TimedOut' });
      expect(await ended(a, a2.id)).toMatchObject({ status: 'success' });
      // b1 has waited longer than its own 6 s timeout; once its tenant may run builds, it runs
      // to success: waiting never eats a build's time.
      await until('b1 to have waited 7 s', async () => {
        const startedAt = Date.parse((await statusOf(b, b1.id)).started_at);
        return Date.now() - startedAt > 7_000 ? true : undefined;
      });
      expect((await statusOf(b, b1.id)).queue).toMatchObject({ reason: 'TenantLimit' });
      await kiln.dataSource.query(
        'UPDATE tenant_admission_settings SET max_running = NULL WHERE tenant_id = $1',
        [seeded.tenantB],
      );
      const b1Done = await ended(b, b1.id);
      expect(b1Done).toMatchObject({ status: 'success' });
      expect(Date.parse(b1Done.completed_at) - Date.parse(b1Done.started_at)).toBeGreaterThan(
        7_000,
      );
      expect((await ended(a, a3.id)).status).toBe('cancelled');
      const [{ admitted_at: a3Admitted }] = await kiln.dataSource.query<
        [{ admitted_at: Date | null }]
      >('SELECT admitted_at FROM build_admissions WHERE build_id = $1', [a3.id]);
      expect(a3Admitted).toBeNull();

      // The wait is in each build's own log: when it began, each change of why, when it ended.
      const b1Log = await messagesOf(b, b1.id);
      const waitLines = b1Log.filter((line) =>
        /^\[kiln\] (waiting|still waiting|admitted)/.test(line),
      );
      expect(waitLines).toEqual([
        // Its place when the line was written: before or after a2 joined the queue.
        expect.stringMatching(
          /^\[kiln\] waiting to run: this tenant's limit on running builds is 0: none runs until an administrator raises it \((1st|2nd) in line\)$/,
        ),
        expect.stringMatching(/^\[kiln\] admitted to run after waiting \d+ s$/),
      ]);
      expect(b1Log.indexOf('[kiln] running on linux/amd64 with the local runner')).toBeGreaterThan(
        b1Log.indexOf(waitLines[1]!),
      );
      expect(await messagesOf(a, a2.id)).toEqual(
        expect.arrayContaining([
          '[kiln] waiting to run: all 1 build slots of this installation are in use (1st in line)',
          expect.stringMatching(/^\[kiln\] admitted to run after waiting \d+ s$/),
        ]),
      );
      // a1 never waited: no line about waiting in its log.
      expect((await messagesOf(a, a1.id)).filter((line) => /waiting|admitted/.test(line))).toEqual(
        [],
      );
    });
  });

  describe('nothing runs (KILN_MAX_RUNNING=0), a 2 s queue time to live, room for 1 waiting build per tenant', () => {
    let kiln: TestApp;
    let seeded: Seeded;
    let a: ApiClient;
    let b: ApiClient;

    beforeAll(async () => {
      ({ kiln, seeded, a, b } = await kilnWith('closed', {
        KILN_MAX_RUNNING: '0',
        KILN_QUEUE_TTL_SECONDS: '2',
        KILN_TENANT_MAX_QUEUED: '1',
      }));
    });

    afterAll(async () => {
      await kiln.close();
    });

    it('refuses a start past the tenant room with 429 and changes nothing, then fails the waiting build with QueueTimeout', async () => {
      const q1 = await a.createBuild(seeded.projectA, 'quick-1');
      const started = await jsonOf(await a.request('POST', `/builds/${q1.id}/start`));
      expect(started.queue).toEqual({
        position: 1,
        reason: 'InstallationLimit',
        message:
          'this installation runs no builds now: its limit on running builds (KILN_MAX_RUNNING) is 0',
        estimated_start: null,
      });

      const q2 = await a.createBuild(seeded.projectA, 'quick-2');
      const refused = await a.request('POST', `/builds/${q2.id}/start`);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(refused.headers.get('x-ratelimit-limit')).toBe('1');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      // The spec's Error shape, as every 429 of kiln has it.
      expect(await jsonOf(refused)).toMatchObject({
        code: 'INVALID_REQUEST',
        error: expect.stringContaining('KILN_TENANT_MAX_QUEUED is 1'),
      });
      expect((await jsonOf(await a.request('GET', `/builds/${q2.id}`))).status).toBe('queued');
      // Another tenant's room is its own.
      const other = await b.createBuild(seeded.projectB, 'quick-1');
      expect((await b.request('POST', `/builds/${other.id}/start`)).status).toBe(200);

      const expired = await ended(a, q1.id, 30_000);
      expect(expired).toMatchObject({
        status: 'failed',
        failure_reason: 'QueueTimeout',
        error_message: expect.stringMatching(
          /^The build waited \d+ s to be admitted, longer than the queue's time to live \(KILN_QUEUE_TTL_SECONDS: 2 s\) \(it waited for: the installation's limit on running builds\)$/,
        ),
      });
      expect(await messagesOf(a, q1.id)).toEqual([
        '[kiln] waiting to run: this installation runs no builds now: its limit on running builds (KILN_MAX_RUNNING) is 0 (1st in line)',
        `ERROR: [kiln] ${expired.error_message}`,
      ]);
      // Its place is free again: the refused build starts now.
      expect((await a.request('POST', `/builds/${q2.id}/start`)).status).toBe(200);
    });
  });

  describe('two kilns on one Postgres where nothing runs (KILN_MAX_RUNNING=0), polling once a minute', () => {
    it('answer the same places, and each sees within a second a wait the other ended', async () => {
      const database = await createTestDatabase();
      // A minute between polls, so an order of a queue that stands still is believed for ten: a
      // place moves here only because a request saw the queue's generation move. An order read
      // within a second still answers while the new one is read.
      const quiet = { KILN_MAX_RUNNING: '0', KILN_ADMISSION_POLL_MS: '60000' };
      const first = await kilnWith('places-1', quiet, database);
      const second = await startTestApp({ database, env: localEnv('places-2', quiet) });
      try {
        const { seeded } = first;
        const tokenA = await tokenFor(second.baseUrl, seeded.users.admin.email);
        const tokenB = await tokenFor(second.baseUrl, seeded.users.adminB.email);
        const on = {
          first: { a: first.a, b: first.b },
          second: {
            a: new ApiClient(second, tokenA, seeded.tenantA),
            b: new ApiClient(second, tokenB, seeded.tenantB),
          },
        };
        const start = async (client: ApiClient, projectId: string, branch: string) => {
          const build = await client.createBuild(projectId, branch);
          expect((await client.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
          return build.id as string;
        };
        // One build after another: requests at once may be answered from two orders, the one
        // read within the second before a change and the new one (QueueOrders), by design. Once
        // one answer comes from the new order, every later one does.
        const positions = async (kiln: { a: ApiClient; b: ApiClient }, ids: string[]) => {
          const places: Array<number | undefined> = [];
          for (const [index, id] of ids.entries()) {
            const client = index === 1 ? kiln.b : kiln.a;
            places.push(
              (await jsonOf(await client.request('GET', `/builds/${id}/status`))).queue?.position,
            );
          }
          return places;
        };
        // Fair share: b's first build goes before a's second.
        const a1 = await start(on.first.a, seeded.projectA, 'quick-1');
        const b1 = await start(on.second.b, seeded.projectB, 'quick-1');
        const a2 = await start(on.second.a, seeded.projectA, 'quick-2');
        const ids = [a1, b1, a2];

        expect(await positions(on.first, ids)).toEqual([1, 2, 3]);
        expect(await positions(on.second, ids)).toEqual([1, 2, 3]);

        expect((await on.first.a.request('POST', `/builds/${a1}/cancel`)).status).toBe(200);
        expect((await ended(on.first.a, a1)).status).toBe('cancelled');

        for (const kiln of [on.second, on.first]) {
          const moved = await until(
            'the places to move',
            async () => {
              const now = await positions(kiln, ids);
              return now[1] === 1 ? now : undefined;
            },
            5_000,
          );
          expect(moved).toEqual([undefined, 1, 2]);
        }
      } finally {
        await second.close();
        await first.kiln.close();
        await database.drop();
      }
    });
  });

  describe('two kilns with the local runner on one Postgres, one slot between them (KILN_MAX_RUNNING=1)', () => {
    it('never runs two builds at once, whichever kiln started them, and runs them all', async () => {
      const database = await createTestDatabase();
      const first = await kilnWith('replica-1', { KILN_MAX_RUNNING: '1' }, database);
      const second = await startTestApp({
        database,
        env: localEnv('replica-2', { KILN_ADMISSION_POLL_MS: '100', KILN_MAX_RUNNING: '1' }),
      });
      try {
        const { seeded } = first;
        const clients = [
          first.a,
          new ApiClient(
            second,
            await tokenFor(second.baseUrl, seeded.users.admin.email),
            seeded.tenantA,
          ),
        ];
        let sampling = true;
        const admitted: number[] = [];
        const sampler = (async () => {
          while (sampling) {
            const [{ n }] = await first.kiln.dataSource.query<[{ n: number }]>(
              `SELECT count(*)::int AS n FROM build_admissions
                WHERE admitted_at IS NOT NULL AND released_at IS NULL`,
            );
            admitted.push(n);
            await new Promise((done) => setTimeout(done, 25));
          }
        })();
        const ids: Array<[ApiClient, string]> = [];
        for (const [index, branch] of ['quick-1', 'quick-2', 'quick-3'].entries()) {
          const client = clients[index % 2]!;
          const build = await client.createBuild(seeded.projectA, branch);
          expect((await client.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
          ids.push([client, build.id as string]);
        }
        const statuses = [];
        for (const [client, id] of ids) statuses.push((await ended(client, id)).status);
        sampling = false;
        await sampler;

        expect(statuses).toEqual(['success', 'success', 'success']);
        expect(Math.max(...admitted)).toBe(1);
        // One at a time, whichever kiln admitted it: their runs do not overlap.
        const runs = await first.kiln.dataSource.query<
          Array<{ admitted_at: Date; released_at: Date }>
        >('SELECT admitted_at, released_at FROM build_admissions ORDER BY admitted_at');
        for (let i = 1; i < runs.length; i++) {
          expect(runs[i]!.admitted_at.getTime()).toBeGreaterThanOrEqual(
            runs[i - 1]!.released_at.getTime(),
          );
        }
      } finally {
        await second.close();
        await first.kiln.close();
        await database.drop();
      }
    });
  });
});
