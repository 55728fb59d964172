import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { fakeBuilderBin } from './support/fake-builders.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { SlowLogReader } from './support/slow-log-reader.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const LINES = 200_000;
const READERS = 2;

/** What a stored log says about the numbered lines 1..LINES a builder printed. */
interface Audit {
  seqDense: boolean;
  numbered: number;
  /** The first number that is not where it should be (missing, repeated or out of order). */
  firstWrong: number | undefined;
  finalLine: boolean;
}

function audit(rows: Array<{ seq: number; message: string }>, finalLine: RegExp): Audit {
  let seqDense = true;
  let expected = 1;
  let firstWrong: number | undefined;
  let numbered = 0;
  let lastNumberAt = -1;
  rows.forEach((row, index) => {
    if (row.seq !== index) seqDense = false;
    if (!/^\d+$/.test(row.message)) return;
    numbered++;
    lastNumberAt = index;
    if (Number(row.message) !== expected) firstWrong ??= expected;
    expected++;
  });
  if (numbered !== LINES) firstWrong ??= expected;
  return {
    seqDense,
    numbered,
    firstWrong,
    finalLine: rows.slice(lastNumberAt + 1).some((row) => finalLine.test(row.message)),
  };
}

describe('local builds printing 200,000 lines while log readers are slow', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-output-');
  const bin = fakeBuilderBin();
  const timings: string[] = [];
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let token: string;

  beforeAll(async () => {
    repo = new GitRepo();
    repo.commit('count', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
        `RUN seq 1 ${LINES}`,
        '',
      ].join('\n'),
    });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
        // The readers are slow, not stalled: kiln must not drop them during the test.
        KILN_WS_STALL_SECONDS: '600',
      },
    });
    seeded = await seedTenancy(kiln);
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      seeded.projectA,
    ]);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  }, 60_000);

  afterAll(async () => {
    await kiln.close();
    await rm(dataDir, { recursive: true, force: true });
    await rm(bin, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
    console.log(`200,000-line builds (start to stored outcome):\n${timings.join('\n')}`);
  });

  async function finished(id: string, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  /** Starts a created build with slow readers attached; returns its outcome and stored lines. */
  async function runWithSlowReaders(id: string, label: string) {
    const readers = Array.from(
      { length: READERS },
      () =>
        new SlowLogReader(`${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`, {
          authorization: `Bearer ${token}`,
          'x-tenant-id': seeded.tenantA,
        }),
    );
    await Promise.all(readers.map((reader) => reader.start()));
    const started = Date.now();
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    const build = await finished(id);
    const received = readers.map((reader) => reader.client.messages.length);
    timings.push(
      `  ${label}: ${((Date.now() - started) / 1000).toFixed(1)} s (readers got ${received.join(', ')} lines by then)`,
    );
    readers.forEach((reader) => reader.stop());
    const rows = await kiln.dataSource.query<Array<{ seq: number; message: string }>>(
      'SELECT seq, message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    return { build, rows, received };
  }

  it.each([1, 2, 3, 4, 5])(
    'stores every line of a builder that drops output when its writes block, once and in order (run %i)',
    async (run) => {
      const manifest = wizardManifest('packer');
      (manifest['build_config'] as Record<string, unknown>)['variables'] = {
        mode: 'lines',
        count: String(LINES),
        patience_ms: '50',
      };
      const created = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });
      const { data } = await jsonOf(created);

      const { build, rows, received } = await runWithSlowReaders(
        data.id,
        `fake builder, run ${run}`,
      );

      expect(build.status).toBe('success');
      expect(audit(rows, new RegExp(`^fake builder: finished ${LINES} lines$`))).toEqual({
        seqDense: true,
        numbered: LINES,
        firstWrong: undefined,
        finalLine: true,
      });
      // The slow readers were attached and reading while the build ran.
      expect(Math.min(...received)).toBeGreaterThan(0);
    },
    60_000,
  );

  it('stores every line of a real buildah RUN step, once and in order, and buildah’s last line', async () => {
    const created = await admin.createBuild(seeded.projectA, 'count');

    const { build, rows } = await runWithSlowReaders(created.id as string, 'real buildah');

    expect(build.status).toBe('success');
    // buildah ends with the new image's id.
    expect(audit(rows, /^[0-9a-f]{64}$/)).toEqual({
      seqDense: true,
      numbered: LINES,
      firstWrong: undefined,
      finalLine: true,
    });
  }, 60_000);
});
