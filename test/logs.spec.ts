import { BuildRunner } from '../src/runners/build-runner.js';
import fc from 'fast-check';
import { LineSplitter } from '../src/logs/line-splitter.js';
import { LogPurger } from '../src/logs/log-purger.js';
import { LogSink } from '../src/logs/log-sink.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const CAP = 1024 * 1024;

describe('build logs over HTTP and the LogSink', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let sink: LogSink;
  let runner: FakeRunner;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      // The background purge does not run during the tests: they drain it when they mean to.
      env: { KILN_LOG_MAX_BYTES_PER_BUILD: String(CAP), KILN_LOG_PURGE_POLL_SECONDS: '3600' },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    sink = kiln.app.get(LogSink);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
  });

  afterAll(async () => {
    await kiln.close();
  });

  let branch = 0;
  async function runningBuild(): Promise<string> {
    const build = await admin.createBuild(seeded.projectA, `logs-${branch++}`);
    await admin.request('POST', `/builds/${build.id}/start`);
    return build.id as string;
  }

  const page = async (id: string, query = '') =>
    jsonOf(await admin.request('GET', `/builds/${id}/logs${query}`));

  it('pages a running build’s log by seq with total_lines', async () => {
    const id = await runningBuild();
    await sink.append(
      id,
      Array.from({ length: 25 }, (_, i) => ({ text: `line ${i}` })),
    );

    const first = await page(id, '?limit=10');
    const last = await page(id, '?offset=20&limit=10');
    const beyond = await page(id, '?offset=25');

    expect(first).toMatchObject({ build_id: id, total_lines: 25, offset: 0, limit: 10 });
    expect(first.logs.map((l: any) => l.message)).toEqual(
      Array.from({ length: 10 }, (_, i) => `line ${i}`),
    );
    expect(first.logs[0]).toEqual({
      timestamp: expect.any(String),
      level: 'INFO',
      message: 'line 0',
      metadata: null,
    });
    expect(last.logs.map((l: any) => l.message)).toEqual([
      'line 20',
      'line 21',
      'line 22',
      'line 23',
      'line 24',
    ]);
    expect(beyond).toMatchObject({ logs: [], total_lines: 25, offset: 25, limit: 100 });
  });

  it.each(['offset=-1', 'limit=0', 'limit=1001', 'offset=abc', 'page=2'])(
    'refuses %s with 400',
    async (query) => {
      const id = await runningBuild();

      const response = await admin.request('GET', `/builds/${id}/logs?${query}`);

      expect(response.status).toBe(400);
      expect((await jsonOf(response)).code).toBe('INVALID_REQUEST');
    },
  );

  it('answers 404 for another tenant’s build and 400 for an id that is not a UUID', async () => {
    const id = await runningBuild();
    const other = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );

    expect((await other.request('GET', `/builds/${id}/logs`)).status).toBe(404);
    expect((await admin.request('GET', '/builds/nope/logs')).status).toBe(400);
  });

  it('gives concurrent appends dense seqs with no gap and no duplicate', async () => {
    const id = await runningBuild();

    await Promise.all(
      Array.from({ length: 10 }, (_, batch) =>
        sink.append(
          id,
          Array.from({ length: 20 }, (_, i) => ({ text: `b${batch}-${i}` })),
        ),
      ),
    );

    const rows = await kiln.dataSource.query(
      'SELECT seq FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    expect(rows.map((r: { seq: number }) => r.seq)).toEqual(
      Array.from({ length: 200 }, (_, i) => i),
    );
  });

  it('SEC-01: masks a registered secret, raw, base64 and URL-encoded, before it is stored', async () => {
    const id = await runningBuild();
    const secret = 's3cr3t-t0ken/with+chars';
    expect(sink.registerSecrets(id, [secret, 'short'])).toEqual([
      { accepted: true },
      { accepted: false, reason: expect.any(String) },
    ]);

    await sink.append(id, [
      { text: `token=${secret}` },
      { text: `b64 ${Buffer.from(secret).toString('base64')}` },
      { text: `url ${encodeURIComponent(secret)}` },
    ]);

    const stored = JSON.stringify(
      await kiln.dataSource.query('SELECT message FROM build_log_lines WHERE build_id = $1', [id]),
    );
    const served = JSON.stringify(await page(id));
    for (const text of [stored, served]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(Buffer.from(secret).toString('base64'));
      expect(text).not.toContain(encodeURIComponent(secret));
      expect(text).toContain('***');
    }
  });

  it('SEC-02: masks a secret cut across two pieces of a long line, even across appends', async () => {
    const id = await runningBuild();
    const secret = 'cut-across-the-64k-boundary';
    sink.registerSecrets(id, [secret]);
    const head = 'a'.repeat(70_000) + secret.slice(0, 10);
    const tail = secret.slice(10) + ' end';

    await sink.append(id, [{ text: head, continued: true }]);
    await sink.append(id, [{ text: tail }]);

    const rows = await kiln.dataSource.query(
      'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    const joined = rows.map((r: { message: string }) => r.message).join('');
    expect(joined).not.toContain(secret);
    expect(joined.endsWith('*** end')).toBe(true);
    expect(joined.length).toBe(70_000 + '*** end'.length);
  });

  it('SEC-02 (property): a secret cut at any byte offset by the line splitter is never stored', async () => {
    const id = await runningBuild();
    const sample = fc.sample(
      fc
        .string({ unit: 'grapheme-ascii', minLength: 8, maxLength: 24 })
        .filter((x) => x.trim() === x && !/\s/.test(x)),
      1,
    )[0]!;
    const secret = `${sample}Z9`;
    sink.registerSecrets(id, [secret]);
    const text = `prefix ${secret} middle ${Buffer.from(secret).toString('base64')} end`;

    // Cut the same output into 16-byte pieces starting at every offset, as a byte stream would be.
    for (let offset = 1; offset < text.length; offset++) {
      const splitter = new LineSplitter({ maxLineBytes: 16 });
      const pieces = [
        ...splitter.push(text.slice(0, offset)),
        ...splitter.push(`${text.slice(offset)}\n`),
        ...splitter.end(),
      ];
      await sink.append(id, pieces);
    }

    const rows = await kiln.dataSource.query(
      'SELECT message, metadata FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    // Rejoin cut pieces (metadata.continued) into the lines a reader sees.
    const stored = rows
      .map((r: { message: string; metadata: Record<string, string> | null }) =>
        r.metadata?.continued === 'true' ? r.message : `${r.message}\n`,
      )
      .join('');
    expect(stored).not.toContain(secret);
    expect(stored).not.toContain(Buffer.from(secret).toString('base64'));
    expect(rows.length).toBeGreaterThan(0);
  });

  it('reads levels and steps from builder output and reports the steps as progress', async () => {
    const id = await runningBuild();

    await sink.append(id, [
      { text: 'STEP 1/4: FROM scratch', format: 'buildah', container: 'build' },
      { text: 'STEP 3/4: RUN make', format: 'buildah', container: 'build' },
      {
        text: 'Error: building at STEP "RUN make": exit status 2',
        format: 'buildah',
        container: 'build',
      },
    ]);

    const { logs } = await page(id);
    expect(logs.map((l: any) => l.level)).toEqual(['INFO', 'INFO', 'ERROR']);
    expect(logs[1].metadata).toMatchObject({ container: 'build', step: '3/4' });
    expect((await jsonOf(await admin.request('GET', `/builds/${id}/status`))).progress).toEqual({
      current_step: 3,
      total_steps: 4,
      percentage: 75,
    });
  });

  it('LOG-10: splits a line over 64 KiB into pieces of at most 64 KiB, marked as continued', async () => {
    const id = await runningBuild();

    await sink.append(id, [{ text: 'é'.repeat(70 * 1024) }]);

    const rows = await kiln.dataSource.query(
      `SELECT octet_length(message) AS bytes, metadata FROM build_log_lines WHERE build_id = $1 ORDER BY seq`,
      [id],
    );
    expect(rows.map((r: any) => r.bytes)).toEqual([65536, 65536, 12288]);
    expect(rows.map((r: any) => r.metadata?.continued ?? null)).toEqual(['true', 'true', null]);
  });

  it('LOG-09: past the per-build cap stores one marker line, counts what it dropped, and leaves the build alone', async () => {
    const id = await runningBuild();
    const line = 'y'.repeat(60 * 1024);

    const first = await sink.append(
      id,
      Array.from({ length: 20 }, () => ({ text: line })),
    );
    const again = await sink.append(id, [{ text: 'after the cap' }]);

    const { logs, total_lines } = await page(id, '?limit=1000');
    expect(first).toMatchObject({ stored: 18, dropped: 3, truncated: true });
    expect(total_lines).toBe(18);
    expect(logs.at(-1)).toMatchObject({
      level: 'WARN',
      metadata: { truncated: 'true' },
      message: expect.stringContaining(`${CAP} bytes`),
    });
    expect(again).toMatchObject({ stored: 0, dropped: 1, truncated: true });
    const [row] = await kiln.dataSource.query(
      `SELECT b.status, l.dropped_lines FROM builds b JOIN build_logs l ON l.build_id = b.id
        WHERE b.id = $1`,
      [id],
    );
    expect(row).toEqual({ status: 'in_progress', dropped_lines: 4 });
  });

  it('deletes a build’s lines after the build, in the background', async () => {
    const id = await runningBuild();
    await sink.append(id, [{ text: 'bye' }, { text: 'again' }]);
    await runner.succeed(id);
    const stored = () =>
      kiln.dataSource.query<[{ n: number }]>(
        'SELECT count(*)::int AS n FROM build_log_lines WHERE build_id = $1',
        [id],
      );

    expect((await admin.request('DELETE', `/builds/${id}`)).status).toBe(204);
    expect((await admin.request('GET', `/builds/${id}/logs`)).status).toBe(404);
    expect(await stored()).toEqual([{ n: 2 }]);

    expect(await kiln.app.get(LogPurger).drain()).toBe(2);
    expect(await stored()).toEqual([{ n: 0 }]);
  });
});
