import { gzipSync } from 'node:zlib';
import { BuildArtifactsRepository } from '../src/artifacts/artifacts.repository.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { LogPurger } from '../src/logs/log-purger.js';
import { LogSink } from '../src/logs/log-sink.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { RetentionRepository } from '../src/retention/retention.repository.js';
import { Retention, type PassReport } from '../src/retention/retention.service.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { FakeRunner } from './support/fake-runner.js';
import { scrape, sumOf } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The installation keeps finished builds 30 days; passes run only when a test says so (the
 * schedule's interval is a week); two builds per transaction, so a pass takes several batches.
 */
const ENV = {
  KILN_RETENTION_DAYS: '30',
  KILN_RETENTION_KEEP_LAST: '0',
  KILN_RETENTION_INTERVAL_SECONDS: '604800',
  KILN_RETENTION_BATCH_BUILDS: '2',
  KILN_LOG_PURGE_PAUSE_MS: '5',
};
const LINES = 250;

type Ending = 'success' | 'failed' | 'cancelled';

interface Rows {
  builds: string[];
  lines: number;
  artifacts: number;
}

/** Builds a tenant's admin makes, ended and aged as a test says, with log lines and an SBOM. */
class Seeder {
  private branch = 0;

  constructor(
    private readonly kiln: TestApp,
    readonly client: ApiClient,
  ) {}

  private get runner(): FakeRunner {
    return this.kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
  }

  async queued(projectId: string): Promise<string> {
    const { id } = (await this.client.createBuild(projectId, `b-${++this.branch}`)) as {
      id: string;
    };
    return id;
  }

  async running(projectId: string, lines = LINES): Promise<string> {
    const id = await this.queued(projectId);
    const started = await this.client.request('POST', `/builds/${id}/start`);
    if (started.status !== 200) throw new Error(`start gave ${started.status}`);
    await this.kiln.app.get(LogSink).append(
      id,
      Array.from({ length: lines }, (_, n) => ({ text: `build ${id} line ${n}` })),
    );
    const stored = await this.kiln.app.get(BuildArtifactsRepository).storeWhileRunning({
      buildId: id,
      kind: 'sbom',
      tool: 'syft',
      format: 'spdx-json',
      content: gzipSync('{"spdxVersion":"SPDX-2.3"}'),
      receivedBytes: 26,
      truncated: false,
      summary: null,
    });
    if (!stored) throw new Error('the SBOM was not stored');
    return id;
  }

  /** A build that ended `daysAgo` days ago. */
  async finished(projectId: string, ending: Ending, daysAgo: number): Promise<string> {
    const id = await this.running(projectId);
    if (ending === 'success') await this.runner.succeed(id);
    if (ending === 'failed') await this.runner.fail(id);
    if (ending === 'cancelled') {
      const cancelled = await this.client.request('POST', `/builds/${id}/cancel`, {});
      if (cancelled.status !== 200) throw new Error(`cancel gave ${cancelled.status}`);
    }
    // kiln reads its clock from the database: a build's end is moved into the past there.
    await this.kiln.dataSource.query(
      `UPDATE builds SET completed_at = now() - make_interval(days => $2),
                         started_at = now() - make_interval(days => $2)
        WHERE id = $1`,
      [id, daysAgo],
    );
    return id;
  }

  /** What is left of these builds: their rows, log lines and artifacts. */
  async left(ids: readonly string[]): Promise<Rows> {
    const [row] = await this.kiln.dataSource.query<
      Array<{ builds: string[] | null; lines: number; artifacts: number }>
    >(
      `SELECT (SELECT array_agg(id::text ORDER BY id) FROM builds WHERE id = ANY($1::uuid[])) AS builds,
              (SELECT count(*)::int FROM build_log_lines WHERE build_id = ANY($1::uuid[])) AS lines,
              (SELECT count(*)::int FROM build_artifacts WHERE build_id = ANY($1::uuid[])) AS artifacts`,
      [ids],
    );
    return { builds: row!.builds ?? [], lines: row!.lines, artifacts: row!.artifacts };
  }
}

const sorted = (ids: Iterable<string>) => [...ids].sort();

/** GET …/logs pages of a build over HTTP, all of them, checking each line is the one expected. */
async function readWholeLog(client: ApiClient, id: string, lines: number): Promise<void> {
  for (let offset = 0; offset < lines; offset += 100) {
    const response = await client.request('GET', `/builds/${id}/logs?offset=${offset}&limit=100`);
    if (response.status !== 200) throw new Error(`page at ${offset} gave ${response.status}`);
    const page = (await response.json()) as { logs: Array<{ message: string }> };
    const expected = Array.from(
      { length: Math.min(100, lines - offset) },
      (_, n) => `build ${id} line ${offset + n}`,
    );
    expect(page.logs.map((line) => line.message)).toEqual(expected);
  }
}

/** Runs `work` again and again until stopped; rejects with its first failure. */
function loop(work: (round: number) => Promise<void>): { stop(): Promise<number> } {
  let stopped = false;
  let rounds = 0;
  const done = (async () => {
    while (!stopped) await work(rounds++);
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return rounds;
    },
  };
}

describe('Retention', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let a: Seeder;
  let b: Seeder;
  let c: Seeder;
  let root: Record<string, string>;
  let projectA2: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner, env: ENV });
    seeded = await seedTenancy(kiln);
    const tenancy = kiln.app.get(TenancyService);
    await tenancy.createUser('root@example.com', PASSWORD);
    await tenancy.setSystemAdmin('root@example.com', true);
    root = { authorization: `Bearer ${await tokenFor(kiln.baseUrl, 'root@example.com')}` };
    const tenantC = await tenancy.createTenant('tenant-c');
    await tenancy.addMember(tenantC.id, seeded.users.admin.email, 'admin');
    const projects = kiln.app.get(ProjectsService);
    projectA2 = (await projects.create(seeded.tenantA, 'api')).id;
    const projectC = (await projects.create(tenantC.id, 'old')).id;
    const adminToken = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    a = new Seeder(kiln, new ApiClient(kiln, adminToken, seeded.tenantA));
    b = new Seeder(
      kiln,
      new ApiClient(kiln, await tokenFor(kiln.baseUrl, seeded.users.adminB.email), seeded.tenantB),
    );
    c = new Seeder(kiln, new ApiClient(kiln, adminToken, tenantC.id));

    // Tenant A: the installation's 30 days.
    ids.a1 = await a.finished(seeded.projectA, 'success', 40);
    ids.a2 = await a.finished(seeded.projectA, 'failed', 31);
    ids.a3 = await a.finished(projectA2, 'cancelled', 45);
    ids.pinned = await a.finished(seeded.projectA, 'success', 50);
    ids.recent = await a.finished(seeded.projectA, 'success', 10);
    ids.queued = await a.queued(seeded.projectA);
    await kiln.dataSource.query(
      "UPDATE builds SET created_at = now() - interval '400 days' WHERE id = $1",
      [ids.queued],
    );
    ids.running = await a.running(projectA2);
    await kiln.dataSource.query(
      "UPDATE builds SET started_at = now() - interval '400 days' WHERE id = $1",
      [ids.running],
    );
    ids.retried = await a.finished(projectA2, 'failed', 60);
    const retry = await a.client.request('POST', `/builds/${ids.retried}/retry`);
    ids.retry = ((await retry.json()) as { id: string }).id;
    // Tenant B: its own policy, the newest 2 builds of a project and no age limit.
    ids.b1 = await b.finished(seeded.projectB, 'success', 100);
    ids.b2 = await b.finished(seeded.projectB, 'failed', 90);
    ids.b3 = await b.finished(seeded.projectB, 'success', 80);
    ids.b4 = await b.finished(seeded.projectB, 'success', 70);
    ids.b5 = await b.finished(seeded.projectB, 'success', 60);
    // Tenant C: retention off.
    ids.c1 = await c.finished(projectC, 'success', 400);
  });

  afterAll(async () => {
    await kiln.close();
  });

  const asRoot = (method: string, path: string, body?: unknown) =>
    fetch(`${kiln.baseUrl}/api/v1${path}`, {
      method,
      headers: { ...root, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  describe('the policy', () => {
    it("lets installation administrators set a tenant's own days and keep-last, null inheriting and 0 off", async () => {
      const before = await asRoot('GET', `/tenants/${seeded.tenantB}/retention`);
      const changed = await asRoot('PATCH', `/tenants/${seeded.tenantB}/retention`, {
        days: 0,
        keep_last: 2,
      });
      const off = await asRoot('PATCH', `/tenants/${c.client.tenantId}/retention`, {
        days: 0,
        keep_last: 0,
      });

      expect(await before.json()).toEqual({
        tenant_id: seeded.tenantB,
        days: null,
        keep_last: null,
        effective: { days: 30, keep_last: 0 },
      });
      expect(await changed.json()).toEqual({
        tenant_id: seeded.tenantB,
        days: 0,
        keep_last: 2,
        effective: { days: 0, keep_last: 2 },
      });
      expect((await off.json()).effective).toEqual({ days: 0, keep_last: 0 });
    });

    it('keeps what a change leaves out and restores the default with null', async () => {
      await asRoot('PATCH', `/tenants/${seeded.tenantA}/retention`, { days: 7, keep_last: 5 });
      const partly = await asRoot('PATCH', `/tenants/${seeded.tenantA}/retention`, { days: null });
      const restored = await asRoot('PATCH', `/tenants/${seeded.tenantA}/retention`, {
        keep_last: null,
      });

      expect((await partly.json()) as unknown).toMatchObject({ days: null, keep_last: 5 });
      expect(await restored.json()).toMatchObject({
        days: null,
        keep_last: null,
        effective: { days: 30, keep_last: 0 },
      });
    });

    it('refuses values out of range and changes nothing', async () => {
      const refused = await asRoot('PATCH', `/tenants/${seeded.tenantB}/retention`, {
        days: -1,
        keep_last: 1.5,
      });
      const now = await asRoot('GET', `/tenants/${seeded.tenantB}/retention`);

      expect(refused.status).toBe(400);
      expect(await now.json()).toMatchObject({ days: 0, keep_last: 2 });
    });

    it('answers 404 for a tenant that does not exist', async () => {
      const response = await asRoot(
        'PATCH',
        '/tenants/6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11/retention',
        { days: 1 },
      );

      expect(response.status).toBe(404);
    });

    it("shows a tenant's admins the policy that applies to them", async () => {
      const response = await b.client.request('GET', '/settings/retention');

      expect(await response.json()).toEqual({
        tenant_id: seeded.tenantB,
        days: 0,
        keep_last: 2,
        effective: { days: 0, keep_last: 2 },
      });
    });
  });

  describe('keep', () => {
    it('pins a build with PUT and unpins it with DELETE, shown as keep on the Build', async () => {
      const fresh = await a.client.request('GET', `/builds/${ids.pinned}`);
      const pinned = await a.client.request('PUT', `/builds/${ids.pinned}/keep`);
      const again = await a.client.request('PUT', `/builds/${ids.pinned}/keep`);
      const b1 = await b.client.request('PUT', `/builds/${ids.b1}/keep`);
      const unpinned = await a.client.request('DELETE', `/builds/${ids.recent}/keep`);

      expect((await fresh.json()).keep).toBe(false);
      expect([pinned.status, again.status, b1.status, unpinned.status]).toEqual([
        200, 200, 200, 200,
      ]);
      expect((await pinned.json()).keep).toBe(true);
      expect((await again.json()).keep).toBe(true);
      expect((await unpinned.json()).keep).toBe(false);
      const listed = await a.client.request('GET', `/builds?limit=100`);
      const keeps = Object.fromEntries(
        ((await listed.json()) as { builds: Array<{ id: string; keep: boolean }> }).builds.map(
          (build) => [build.id, build.keep],
        ),
      );
      expect(keeps[ids.pinned!]).toBe(true);
      expect(keeps[ids.a1!]).toBe(false);
    });

    it("answers 404 for another tenant's build", async () => {
      const response = await b.client.request('PUT', `/builds/${ids.a1}/keep`);

      expect(response.status).toBe(404);
    });
  });

  describe('a pass', () => {
    const doomed = () => ({
      [ids.a1!]: 'age',
      [ids.a2!]: 'age',
      [ids.a3!]: 'age',
      [ids.b2!]: 'count',
      [ids.b3!]: 'count',
    });
    let preview: any;
    let tenantPreview: any;
    let report: PassReport;
    let appended = 0;
    let pages = 0;
    let before: Map<string, any>;

    beforeAll(async () => {
      before = await scrape(`${kiln.baseUrl}/metrics`);
      preview = await (await asRoot('GET', '/retention/preview?limit=1000')).json();
      tenantPreview = await (await a.client.request('GET', '/settings/retention/preview')).json();

      // Another project's build appends, and a client pages a build that stays, all through the
      // pass and the purge of the deleted builds' lines.
      const sink = kiln.app.get(LogSink);
      const appender = loop(async (round) => {
        await sink.append(
          ids.running!,
          Array.from({ length: 10 }, (_, n) => ({
            text: `build ${ids.running} line ${LINES + round * 10 + n}`,
          })),
        );
      });
      const pager = loop(async () => {
        await readWholeLog(a.client, ids.recent!, LINES);
      });
      report = await kiln.app.get(Retention).runPass();
      await kiln.app.get(LogPurger).drain();
      appended = (await appender.stop()) * 10;
      pages = await pager.stop();
    });

    it('is previewed exactly, by rule, oldest first', () => {
      const rules = Object.fromEntries(
        (preview.builds as Array<{ id: string; rule: string }>).map((build) => [
          build.id,
          build.rule,
        ]),
      );

      expect(rules).toEqual(doomed());
      expect(preview).toMatchObject({ tenant_id: null, total: 5, by_rule: { age: 3, count: 2 } });
      const completed = (preview.builds as Array<{ completed_at: string }>).map(
        (build) => build.completed_at,
      );
      expect(completed).toEqual([...completed].sort());
    });

    it("previews for a tenant's admins only their tenant", () => {
      expect(tenantPreview).toMatchObject({
        tenant_id: seeded.tenantA,
        total: 3,
        by_rule: { age: 3, count: 0 },
      });
      expect(sorted(tenantPreview.builds.map((build: { id: string }) => build.id))).toEqual(
        sorted([ids.a1!, ids.a2!, ids.a3!]),
      );
    });

    it('deletes exactly the builds the policy names, with their log lines and artifacts', async () => {
      const all = Object.values(ids);
      const left = await a.left(all);
      const gone = await a.left(Object.keys(doomed()));

      expect(left.builds).toEqual(sorted(all.filter((id) => !(id in doomed()))));
      expect(gone).toEqual({ builds: [], lines: 0, artifacts: 0 });
      expect(report).toMatchObject({ deleted: 5, byRule: { age: 3, count: 2 } });
      expect(sorted(kiln.app.get<BuildRunner, FakeRunner>(BuildRunner).removed)).toEqual(
        sorted(Object.keys(doomed())),
      );
    });

    it('leaves pinned, recent, queued, running and retried builds, and tenants with retention off', async () => {
      const kept = [
        ids.pinned,
        ids.recent,
        ids.queued,
        ids.running,
        ids.retried,
        ids.retry,
        ids.b1,
        ids.b4,
        ids.b5,
        ids.c1,
      ] as string[];

      const left = await a.left(kept);

      expect(left.builds).toEqual(sorted(kept));
      expect(left.artifacts).toBe(kept.length - 2); // the queued build and the retry never ran
    });

    it('keeps every line of the build that appended meanwhile, and every page read meanwhile was whole', async () => {
      const response = await a.client.request('GET', `/builds/${ids.running}/logs?limit=1`);
      const { total_lines } = (await response.json()) as { total_lines: number };

      expect(total_lines).toBe(LINES + appended);
      await readWholeLog(a.client, ids.running!, LINES + appended);
      expect(pages).toBeGreaterThan(0);
    });

    it('logs one line with what it removed, by rule and by tenant', () => {
      const lines = kiln.logs.lines.filter((line) => line['retention'] !== undefined);

      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 'info',
        retention: {
          deleted: 5,
          byRule: { age: 3, count: 2 },
          byTenant: { [seeded.tenantA]: 3, [seeded.tenantB]: 2 },
          days: 30,
          keep_last: 0,
        },
      });
    });

    it('counts what it removed in /metrics', async () => {
      const after = await scrape(`${kiln.baseUrl}/metrics`);
      const moved = (sample: string, labels: Record<string, string>) =>
        sumOf(after, sample, labels) - sumOf(before, sample, labels);

      expect(moved('kiln_retention_builds_deleted_total', { rule: 'age' })).toBe(3);
      expect(moved('kiln_retention_builds_deleted_total', { rule: 'count' })).toBe(2);
      expect(moved('kiln_retention_runs_total', { result: 'success' })).toBe(1);
      expect(moved('kiln_retention_runs_total', { result: 'error' })).toBe(0);
    });

    it('leaves nothing for the next pass, and the preview is empty', async () => {
      const next = await kiln.app.get(Retention).runPass();
      const empty = await (await asRoot('GET', '/retention/preview')).json();

      expect(next.deleted).toBe(0);
      expect(empty).toMatchObject({ total: 0, builds: [] });
    });

    it('deletes an unpinned build once its pin is taken away', async () => {
      await a.client.request('DELETE', `/builds/${ids.pinned}/keep`);

      const next = await kiln.app.get(Retention).runPass();

      expect(next).toMatchObject({ deleted: 1, byRule: { age: 1, count: 0 } });
      expect((await a.left([ids.pinned!])).builds).toEqual([]);
    });
  });
});

describe('Retention on two replicas', () => {
  let database: TestDatabase;
  let one: TestApp;
  let two: TestApp;
  let doomed: string[];
  let kept: string[];
  let preview: string[];
  let reports: PassReport[];

  beforeAll(async () => {
    database = await createTestDatabase();
    one = await startTestApp({ database, runner: FakeRunner, env: ENV });
    two = await startTestApp({ database, runner: FakeRunner, env: ENV });
    const seeded = await seedTenancy(one);
    const seeder = new Seeder(
      one,
      new ApiClient(one, await tokenFor(one.baseUrl, seeded.users.admin.email), seeded.tenantA),
    );
    doomed = [];
    kept = [];
    for (let n = 0; n < 24; n++) {
      doomed.push(await seeder.finished(seeded.projectA, 'success', 31 + n));
    }
    for (let n = 0; n < 4; n++) kept.push(await seeder.finished(seeded.projectA, 'failed', n));
    const answer = await one.app.get(Retention).preview(undefined, 1000);
    preview = answer.builds.map((build) => build.id);
    reports = await Promise.all([
      one.app.get(Retention).runPass(),
      two.app.get(Retention).runPass(),
    ]);
    await one.app.get(LogPurger).drain();
  });

  afterAll(async () => {
    await one.close();
    await two.close();
    await database.drop();
  });

  it('deletes every doomed build exactly once between them, and nothing else', async () => {
    const removed = [one, two].flatMap(
      (kiln) => kiln.app.get<BuildRunner, FakeRunner>(BuildRunner).removed,
    );
    const left = await one.dataSource.query<Array<{ id: string }>>('SELECT id FROM builds');

    expect(sorted(removed)).toEqual(sorted(doomed));
    expect(reports[0]!.deleted + reports[1]!.deleted).toBe(doomed.length);
    expect(sorted(left.map((row) => row.id))).toEqual(sorted(kept));
    const [{ n }] = await one.dataSource.query<[{ n: number }]>(
      'SELECT count(*)::int AS n FROM build_log_lines WHERE build_id = ANY($1::uuid[])',
      [doomed],
    );
    expect(n).toBe(0);
  });

  it('deleted what the dry run listed before', () => {
    expect(sorted(preview)).toEqual(sorted(doomed));
  });

  it('logged no failure on either replica', () => {
    const failures = [one, two].flatMap((kiln) =>
      kiln.logs.lines.filter((line) => line['level'] === 'error' || line['level'] === 'fatal'),
    );

    expect(failures).toEqual([]);
  });

  it('runs one scheduled pass per interval, whichever replica asks first', async () => {
    // An hour's interval (the replicas' own schedule is a week's: it claims nothing here).
    await one.dataSource.query(
      "UPDATE retention_schedule SET last_started_at = now() - interval '2 hours'",
    );

    const claims = await Promise.all(
      [one, two, one, two].map((kiln) => kiln.app.get(RetentionRepository).claimPass(3_600_000)),
    );

    expect(claims.filter(Boolean)).toHaveLength(1);
  });
});
