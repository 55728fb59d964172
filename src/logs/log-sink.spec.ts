import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiClient } from '../../test/support/builds.js';
import { FakeRunner } from '../../test/support/fake-runner.js';
import { startTestApp, type TestApp } from '../../test/support/test-app.js';
import { KilnConfig } from '../config/config.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LogSink } from './log-sink.js';
import { MASK } from './secret-masker.js';

const BOOTSTRAP_EMAIL = 'root@example.com';
const BOOTSTRAP_PASSWORD = 'bootstrap-admin-password-42';

/** Creates a build as the admin kiln bootstrapped at start (its default tenant and project). */
async function createBuild(kiln: TestApp, branch: string): Promise<string> {
  const bootstrap = kiln.logs.find((l) => String(l['msg']).startsWith('bootstrap:'))!;
  const login = await fetch(`${kiln.baseUrl}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: BOOTSTRAP_EMAIL, password: BOOTSTRAP_PASSWORD }),
  });
  const { access_token: token } = (await login.json()) as { access_token: string };
  const admin = new ApiClient(kiln, token, bootstrap['tenant_id'] as string);
  return (await admin.createBuild(bootstrap['project_id'] as string, branch)).id as string;
}

/** Medium tests: the LogSink of a real kiln application on a real database. */
describe(LogSink.name, () => {
  describe("with kiln's secrets from its configuration and its data directory", () => {
    let kiln: TestApp;
    let sink: LogSink;
    let jwtSecret: string;
    let databaseUrl: string;
    let databasePassword: string;

    beforeAll(async () => {
      kiln = await startTestApp({
        runner: FakeRunner,
        env: {
          // Unset: kiln generates the JWT secret into KILN_DATA_DIR at start.
          KILN_JWT_SECRET: '',
          KILN_BOOTSTRAP_ADMIN_EMAIL: BOOTSTRAP_EMAIL,
          KILN_BOOTSTRAP_ADMIN_PASSWORD: BOOTSTRAP_PASSWORD,
        },
      });
      sink = kiln.app.get(LogSink);
      const config = kiln.app.get(KilnConfig);
      expect(config.jwtSecret.kind).toBe('generated');
      jwtSecret = readFileSync(join(config.dataDir, 'jwt-secret'), 'utf8').trim();
      databaseUrl = config.databaseUrl!;
      databasePassword = decodeURIComponent(new URL(databaseUrl).password);
      expect(databasePassword.length).toBeGreaterThanOrEqual(8);
    });

    afterAll(async () => {
      await kiln.close();
    });

    it("masks a build's registered secret and kiln's own secrets in maskText", () => {
      sink.registerSecrets('build-with-secrets', ['registry-token-123']);
      const text = [
        'registry-token-123',
        jwtSecret,
        `password=${databasePassword}`,
        BOOTSTRAP_PASSWORD,
        `url ${databaseUrl}`,
      ].join(' | ');

      expect(sink.maskText('build-with-secrets', text)).toBe(
        [MASK, MASK, `password=${MASK}`, MASK, `url ${MASK}`].join(' | '),
      );
    });

    it("masks kiln's own secrets for a build that registered none, and not another build's", () => {
      sink.registerSecrets('other-build', ['only-for-the-other-build']);

      expect(
        sink.maskText(
          'build-without-secrets',
          `${jwtSecret} ${BOOTSTRAP_PASSWORD} only-for-the-other-build`,
        ),
      ).toBe(`${MASK} ${MASK} only-for-the-other-build`);
    });

    it("stores a line carrying kiln's JWT secret masked, raw or base64, for any build", async () => {
      const id = await createBuild(kiln, 'masking');
      const base64 = Buffer.from(jwtSecret).toString('base64');

      await sink.append(id, [
        { text: `signing with ${jwtSecret}` },
        { text: `Authorization: ${base64}` },
      ]);

      const rows = await kiln.dataSource.query<Array<{ message: string }>>(
        'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
        [id],
      );
      expect(rows.map((r) => r.message)).toEqual([
        `signing with ${MASK}`,
        `Authorization: ${MASK}`,
      ]);
    });

    it('stores a URL a build printed without its credentials, and the rest of the line as it was', async () => {
      const id = await createBuild(kiln, 'url-credentials');

      await sink.append(id, [
        { text: 'fatal: unable to access https://ci-bot:hunter2-token@git.example.com/app.git/' },
        { text: 'cloning ssh://git@git.example.com/app.git' },
      ]);

      const rows = await kiln.dataSource.query<Array<{ message: string }>>(
        'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
        [id],
      );
      expect(rows.map((r) => r.message)).toEqual([
        'fatal: unable to access https://git.example.com/app.git/',
        'cloning ssh://git@git.example.com/app.git',
      ]);
      expect(sink.maskText(id, 'at http://kiln:PASSWORD@vault:8200')).toBe('at http://vault:8200');
    });

    it('stores a NUL a builder printed as \\x00 (Postgres text holds none), alone or grouped with other builds', async () => {
      const [first, second] = [await createBuild(kiln, 'nul-1'), await createBuild(kiln, 'nul-2')];

      // The first append of each build goes on its own, the next ones in a group.
      for (const id of [first, second]) await sink.append(id, [{ text: 'a\u0000b' }]);
      await Promise.all([first, second].map((id) => sink.append(id, [{ text: '\u0000' }])));

      for (const id of [first, second]) {
        const rows = await kiln.dataSource.query<Array<{ message: string }>>(
          'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
          [id],
        );
        expect(rows.map((r) => r.message)).toEqual(['a\\x00b', '\\x00']);
      }
    });

    it('stores nothing on a retry when the build already has the lines the first attempt would have left', async () => {
      const id = await createBuild(kiln, 'retry');
      const repository = kiln.app.get(BuildLogsRepository);
      const line = (message: string) => ({
        ts: new Date(),
        level: 'INFO' as const,
        message,
        metadata: null,
      });
      const marker = () => line('cap');
      await repository.append(id, [line('first'), line('second')], 1024 * 1024, marker);

      // The first attempt committed (the build has 2 lines): the retry is a no-op.
      await repository.append(id, [line('second')], 1024 * 1024, marker, { storedIfLogLines: 2 });
      // This one's first attempt did not commit (the build does not have 3 lines): it is stored.
      await repository.append(id, [line('third')], 1024 * 1024, marker, { storedIfLogLines: 3 });

      const rows = await kiln.dataSource.query<Array<{ seq: number; message: string }>>(
        'SELECT seq, message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
        [id],
      );
      expect(rows).toEqual([
        { seq: 0, message: 'first' },
        { seq: 1, message: 'second' },
        { seq: 2, message: 'third' },
      ]);
    });
  });

  describe('with KILN_JWT_SECRET set', () => {
    let kiln: TestApp;

    beforeAll(async () => {
      kiln = await startTestApp({
        runner: FakeRunner,
        env: { KILN_JWT_SECRET: 'a-configured-jwt-secret-of-32-bytes!' },
      });
    });

    afterAll(async () => {
      await kiln.close();
    });

    it('masks the configured JWT secret', () => {
      expect(
        kiln.app.get(LogSink).maskText('any-build', 'a-configured-jwt-secret-of-32-bytes!'),
      ).toBe(MASK);
    });
  });
});
