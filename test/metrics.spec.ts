import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { METRICS, type MetricName } from '../src/metrics/catalog.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { type Family, scrape, sumOf } from './support/prometheus-text.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The core and API metrics move where the work happens (issue 32): a real local build (buildah,
 * a registry) through the HTTP API moves the build and log counters; a failed and a cancelled
 * build count under their result; waiting builds show by reason; a WebSocket log stream opens and
 * closes; and label sets stay bounded under 1,000 builds. Every check reads a value before and
 * after and compares: never a timing.
 */
jest.setTimeout(300_000);

/** kiln's own secret: masked in every build's output, wherever the build prints it. */
const JWT_SECRET = 'metrics-spec-jwt-secret-of-32-bytes-or-more';

const SLOW_DOCKERFILE = [
  'FROM scratch',
  'COPY busybox /bin/busybox',
  'RUN ["/bin/busybox", "sh", "-c", "echo sleeping && /bin/busybox sleep 120"]',
  '',
].join('\n');

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('metrics of a real local build (buildah, registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-metrics-');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let a: ApiClient;
  let token: string;
  let tenantA: string;
  let projectA: string;

  const metrics = () => scrape(`${kiln.baseUrl}/metrics`);

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('prints-secret', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        `RUN ["/bin/busybox", "sh", "-c", "echo the secret is ${JWT_SECRET}"]`,
        '',
      ].join('\n'),
    });
    repo.commit('fails', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "false"]\n',
    });
    repo.commit('slow', { busybox: { copyFrom: '/bin/busybox' }, Dockerfile: SLOW_DOCKERFILE });
    repo.commit('quick', {
      'hello.txt': 'hello\n',
      Dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
    });
    kiln = await startTestApp({
      env: {
        KILN_JWT_SECRET: JWT_SECRET,
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_CANCEL_GRACE_SECONDS: '1',
        KILN_ADMISSION_POLL_MS: '100',
        // One slot: a second build waits, for InstallationLimit.
        KILN_MAX_RUNNING: '1',
      },
    });
    const seeded = await seedTenancy(kiln);
    tenantA = seeded.tenantA;
    projectA = seeded.projectA;
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      projectA,
    ]);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    a = new ApiClient(kiln, token, tenantA);
  });

  afterAll(async () => {
    await kiln.close();
    await registry.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  async function start(branch: string): Promise<string> {
    const build = await a.createBuild(projectA, branch);
    const started = await a.request('POST', `/builds/${build.id}/start`);
    expect(started.status).toBe(200);
    return build.id as string;
  }

  async function ended(id: string, timeoutMs = 120_000): Promise<any> {
    return until(
      `build ${id} to end`,
      async () => {
        const build = await jsonOf(await a.request('GET', `/builds/${id}`));
        return ['queued', 'in_progress'].includes(build.status) ? undefined : build;
      },
      timeoutMs,
    );
  }

  const messagesOf = async (id: string): Promise<string[]> =>
    (await jsonOf(await a.request('GET', `/builds/${id}/logs?limit=1000`))).logs.map(
      (line: { message: string }) => line.message,
    );

  /** What each named sample moved by between two scrapes. */
  function moved(
    before: Map<string, Family>,
    after: Map<string, Family>,
  ): (sample: string, where?: Record<string, string>) => number {
    return (sample, where = {}) => sumOf(after, sample, where) - sumOf(before, sample, where);
  }

  it('counts a successful build started and finished, its run and wait, and its log lines, bytes and masked lines', async () => {
    const before = await metrics();
    const id = await start('prints-secret');
    const build = await ended(id);
    expect(build.status).toBe('success');
    const messages = (await messagesOf(id)).join('\n');
    expect(messages).toContain('the secret is ***');
    expect(messages).not.toContain(JWT_SECRET);
    const delta = moved(before, await metrics());

    expect(delta('kiln_builds_started_total', { method: 'kaniko' })).toBe(1);
    expect(
      delta('kiln_builds_finished_total', {
        method: 'kaniko',
        result: 'success',
        reason: 'none',
        class: 'none',
      }),
    ).toBe(1);
    expect(delta('kiln_builds_finished_total')).toBe(1);
    expect(
      delta('kiln_build_duration_seconds_count', { method: 'kaniko', result: 'success' }),
    ).toBe(1);
    expect(delta('kiln_build_wait_seconds_count', { method: 'kaniko' })).toBe(1);
    expect(delta('kiln_log_lines_stored_total')).toBeGreaterThan(0);
    expect(delta('kiln_log_bytes_stored_total')).toBeGreaterThan(
      delta('kiln_log_lines_stored_total'),
    );
    expect(delta('kiln_log_append_duration_seconds_count')).toBeGreaterThan(0);
    // The RUN line buildah echoes and the line the step printed both held the secret.
    expect(delta('kiln_log_lines_masked_total')).toBeGreaterThanOrEqual(1);
    expect(delta('kiln_log_lines_dropped_total')).toBe(0);
  });

  it('counts a failed build under result="failed" with its reason and class', async () => {
    const before = await metrics();
    const build = await ended(await start('fails'));
    expect({ status: build.status, reason: build.failure_reason }).toEqual({
      status: 'failed',
      reason: 'BuildFailed',
    });
    const delta = moved(before, await metrics());

    expect(
      delta('kiln_builds_finished_total', {
        method: 'kaniko',
        result: 'failed',
        reason: 'BuildFailed',
        class: 'user',
      }),
    ).toBe(1);
    expect(delta('kiln_builds_finished_total')).toBe(1);
    expect(delta('kiln_build_duration_seconds_count', { result: 'failed' })).toBe(1);
  });

  it('shows a waiting build by its reason, streams a log over a WebSocket, counts a cancel and each closed stream', async () => {
    const before = await metrics();
    const slow = await start('slow');
    await until('the slow build to run', async () =>
      (await messagesOf(slow)).some((line) => line.includes('sleeping')) ? true : undefined,
    );
    const waiting = await start('quick');

    // Admission says why the second build waits at its next look: the one slot is taken.
    const queued = await until('the waiting build by its reason', async () => {
      const now = await metrics();
      return sumOf(now, 'kiln_builds_waiting', { reason: 'InstallationLimit' }) === 1
        ? now
        : undefined;
    });
    expect(sumOf(queued, 'kiln_builds_running')).toBe(1);
    expect(sumOf(queued, 'kiln_builds_waiting_oldest_seconds')).toBeGreaterThan(0);

    // A stream of the running build, and one of the waiting build that its client closes.
    const streamOf = (id: string) =>
      new LogStreamClient(`${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`, {
        headers: { authorization: `Bearer ${token}`, 'x-tenant-id': tenantA },
      });
    const slowStream = streamOf(slow);
    const clientStream = streamOf(waiting);
    await Promise.all([slowStream.opened, clientStream.opened]);
    const open = await metrics();
    expect(moved(before, open)('kiln_log_streams_open')).toBe(2);

    clientStream.close();
    await clientStream.closed;
    const afterClient = await until('the closed stream to be counted', async () => {
      const now = await metrics();
      return moved(open, now)('kiln_log_streams_open') === -1 ? now : undefined;
    });
    expect(
      moved(open, afterClient)('kiln_log_stream_sessions_closed_total', { reason: 'client' }),
    ).toBe(1);

    // A refused upgrade (no token) opens nothing and is counted as refused.
    const refused = new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${slow}/logs/stream`,
    );
    await expect(refused.opened).rejects.toMatchObject({ status: 401 });

    const cancelled = await a.request('POST', `/builds/${slow}/cancel`, { reason: 'enough' });
    expect(cancelled.status).toBe(200);
    expect(await slowStream.closed).toMatchObject({ code: 1000 });
    expect((await ended(waiting)).status).toBe('success');
    const after = await until('every stream to be closed and counted', async () => {
      const now = await metrics();
      return sumOf(now, 'kiln_log_streams_open') === sumOf(before, 'kiln_log_streams_open')
        ? now
        : undefined;
    });
    const delta = moved(before, after);

    expect(delta('kiln_log_stream_sessions_closed_total', { reason: 'build_finished' })).toBe(1);
    expect(delta('kiln_log_stream_sessions_closed_total', { reason: 'client' })).toBe(1);
    expect(delta('kiln_log_stream_sessions_closed_total', { reason: 'refused' })).toBe(1);
    expect(delta('kiln_log_stream_sessions_closed_total')).toBe(3);
    expect(
      delta('kiln_builds_finished_total', {
        result: 'cancelled',
        reason: 'none',
        class: 'none',
      }),
    ).toBe(1);
    expect(delta('kiln_builds_finished_total', { result: 'success' })).toBe(1);
    expect(delta('kiln_builds_started_total')).toBe(2);
    expect(delta('kiln_build_wait_seconds_count')).toBe(2);
    // Nothing waits or runs now.
    expect(sumOf(after, 'kiln_builds_waiting')).toBe(0);
    expect(sumOf(after, 'kiln_builds_running')).toBe(0);
    expect(sumOf(after, 'kiln_builds_waiting_oldest_seconds')).toBe(0);
  });

  it('reports the database pool by state', async () => {
    const families = await metrics();
    const states = families
      .get('kiln_db_pool_connections')
      ?.samples.map((sample) => sample.labels['state'])
      .sort();
    expect(states).toEqual(['idle', 'in_use', 'waiting']);
    // This scrape runs no query on the pool's connections: at least one is open, none waits.
    expect(
      sumOf(families, 'kiln_db_pool_connections', { state: 'idle' }) +
        sumOf(families, 'kiln_db_pool_connections', { state: 'in_use' }),
    ).toBeGreaterThan(0);
  });
});

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
const PER_TENANT = new Set(
  (Object.entries(METRICS) as Array<[MetricName, { perTenant?: boolean }]>)
    .filter(([, definition]) => definition.perTenant === true)
    .map(([name]) => name),
);

/** How a build of the volume run ends: every combination comes up within the first rounds. */
const ENDINGS = [
  'success',
  'BuildFailed',
  'InternalError',
  'TimedOut',
  'ImagePullFailed',
  'cancel',
] as const;

describe('label sets under 1,000 builds (fake runner)', () => {
  let kiln: TestApp;
  let runner: FakeRunner;
  let clients: Array<{ client: ApiClient; projects: string[] }>;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    clients = await tenantsWithProjects(kiln, 4, 3);
  });
  afterAll(() => kiln.close());

  it('keeps every label value bounded (no id, number or path) and the series per family independent of the build count', async () => {
    // A first scrape: GET /metrics is a route of its own, counted from then on.
    await scrape(`${kiln.baseUrl}/metrics`);
    await runBuilds(runner, clients, 0, 200);
    const early = await scrape(`${kiln.baseUrl}/metrics`);
    await runBuilds(runner, clients, 200, 1000);
    const late = await scrape(`${kiln.baseUrl}/metrics`);

    expect(sumOf(late, 'kiln_builds_started_total')).toBe(1000);
    expect(sumOf(late, 'kiln_builds_finished_total')).toBe(1000);
    const problems: string[] = [];
    for (const family of kilnFamilies(late)) {
      for (const sample of family.samples) {
        for (const [label, value] of Object.entries(sample.labels)) {
          if (label === 'le') continue;
          if (UUID.test(value)) problems.push(`${sample.name} ${label}="${value}": an id`);
          // `code` is an HTTP status code (kiln_kube_api_requests_total): bounded.
          if (label !== 'code' && /^\d+$/.test(value))
            problems.push(`${sample.name} ${label}="${value}": a number`);
          if (label === 'route') {
            const template = value === 'unmatched' || /^(\/(:?[a-z][a-z0-9_-]*))+\/?$/i;
            if (template !== true && !template.test(value))
              problems.push(`${sample.name} route="${value}": not a template`);
          } else if (value.includes('/')) {
            problems.push(`${sample.name} ${label}="${value}": a path`);
          }
        }
      }
    }
    expect(problems).toEqual([]);

    const seriesOf = (families: Map<string, Family>) =>
      Object.fromEntries(kilnFamilies(families).map((f) => [f.name, seriesCount(f)]));
    // 800 more builds of the same kinds add no series; no family has more than a few dozen.
    expect(seriesOf(late)).toEqual(seriesOf(early));
    for (const [name, count] of Object.entries(seriesOf(late))) {
      expect({ name, bounded: count <= 60 }).toEqual({ name, bounded: true });
    }
    expect(seriesCount(late.get('kiln_builds_finished_total')!)).toBe(ENDINGS.length);
  });
});

describe('KILN_METRICS_TENANT_LABELS=true', () => {
  let kiln: TestApp;
  let runner: FakeRunner;
  let clients: Array<{ client: ApiClient; projects: string[] }>;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_METRICS_TENANT_LABELS: 'true' },
    });
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    clients = await tenantsWithProjects(kiln, 3, 1);
  });
  afterAll(() => kiln.close());

  it('adds the tenant label to the per-tenant families only, one series set per tenant', async () => {
    await runBuilds(runner, clients, 0, 3 * ENDINGS.length);
    const families = await scrape(`${kiln.baseUrl}/metrics`);
    const tenants = clients.map(({ client }) => client.tenantId).sort();

    const withTenant = kilnFamilies(families)
      .filter((family) => family.samples.some((sample) => 'tenant' in sample.labels))
      .map((family) => family.name);
    expect(withTenant.filter((name) => !PER_TENANT.has(name as MetricName))).toEqual([]);
    for (const name of [
      'kiln_builds_started_total',
      'kiln_builds_finished_total',
      'kiln_build_duration_seconds',
    ]) {
      const labelled = new Set(
        families.get(name)!.samples.map((sample) => sample.labels['tenant']),
      );
      expect([...labelled].sort()).toEqual(tenants);
    }
    for (const tenant of tenants) {
      expect(sumOf(families, 'kiln_builds_started_total', { tenant })).toBe(ENDINGS.length);
    }
  });
});

/** `count` tenants of `projectsEach` projects each, with one admin client per tenant. */
async function tenantsWithProjects(
  kiln: TestApp,
  count: number,
  projectsEach: number,
): Promise<Array<{ client: ApiClient; projects: string[] }>> {
  const seeded = await seedTenancy(kiln);
  const tenancy = kiln.app.get(TenancyService);
  const projectsService = kiln.app.get(ProjectsService);
  const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
  const out: Array<{ client: ApiClient; projects: string[] }> = [];
  for (let t = 0; t < count; t++) {
    const tenant = t === 0 ? seeded.tenantA : (await tenancy.createTenant(`volume-${t}`)).id;
    if (t > 0) await tenancy.addMember(tenant, seeded.users.admin.email, 'admin');
    const projects: string[] = [];
    for (let p = 0; p < projectsEach; p++) {
      const url = `https://git.example.com/t${t}/app-${p}.git`;
      projects.push((await projectsService.create(tenant, `app-${t}-${p}`, url)).id);
    }
    out.push({ client: new ApiClient(kiln, token, tenant), projects });
  }
  return out;
}

/**
 * Builds `from` to `to` (exclusive) through the API: created, started, then ended by the fake
 * runner (success or a failure reason) or cancelled through the API, eight at a time.
 */
async function runBuilds(
  runner: FakeRunner,
  clients: Array<{ client: ApiClient; projects: string[] }>,
  from: number,
  to: number,
): Promise<void> {
  const one = async (n: number) => {
    const { client, projects } = clients[n % clients.length]!;
    const project = projects[Math.floor(n / clients.length) % projects.length]!;
    const build = await client.createBuild(project, `branch-${n}`);
    const started = await client.request('POST', `/builds/${build.id}/start`);
    if (started.status !== 200) throw new Error(`start gave ${started.status}`);
    const ending = ENDINGS[n % ENDINGS.length]!;
    if (ending === 'success') await runner.succeed(build.id);
    else if (ending === 'cancel') {
      const cancelled = await client.request('POST', `/builds/${build.id}/cancel`, {});
      if (cancelled.status !== 200) throw new Error(`cancel gave ${cancelled.status}`);
    } else await runner.fail(build.id, ending);
    // The same outcome reported again (a runner's retry) changes nothing and counts nothing.
    const again = await runner.succeed(build.id).then(
      () => 'written',
      () => 'refused',
    );
    if (again !== 'refused') throw new Error(`a second outcome of ${build.id} was written`);
    // Read back by id: counted by its route template.
    await client.request('GET', `/builds/${build.id}`);
  };
  const lanes = 8;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let n = from + lane; n < to; n += lanes) await one(n);
    }),
  );
}

function kilnFamilies(families: Map<string, Family>): Family[] {
  return [...families.values()].filter((family) => family.name.startsWith('kiln_'));
}

/** Distinct label sets of a family, buckets of one histogram series counted once. */
function seriesCount(family: Family): number {
  const keys = new Set(
    family.samples.map((sample) => {
      const labels = Object.entries(sample.labels).filter(([label]) => label !== 'le');
      return JSON.stringify(labels.sort());
    }),
  );
  return keys.size;
}
