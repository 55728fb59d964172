import { DataSource } from 'typeorm';
import { BuildRunner } from '../src/runners/build-runner.js';
import { SEALED_PREFIX, SecretSealer } from '../src/secrets/secret-sealer.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { auditCredentials } from './support/credential-audit.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

describe('buildx secrets at rest', () => {
  const VALUE = 'npm_tok_9f8e7d6c5b4a39281706';
  let kiln: TestApp;
  // The sealed value is stored and handed on; shown in no response and stored raw in no row.
  const audit = auditCredentials(async (found) => {
    found.kilnOrigin(kiln.baseUrl);
    found.record("kiln's own log", kiln.logs.raw.join('\n'));
    await found.recordDatabase(kiln.dataSource);
  });
  audit.register(VALUE);
  let seeded: Seeded;
  let admin: ApiClient;
  let runner: FakeRunner;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('stores a buildx secret sealed: no column of the build holds its value, the runner gets it back', async () => {
    const manifest = wizardManifest('buildx');
    (manifest['build_config'] as Record<string, unknown>)['secrets'] = { NPM_TOKEN: VALUE };
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);

    const [row] = await kiln.app
      .get(DataSource)
      .query<Array<Record<string, unknown>>>('SELECT * FROM builds WHERE id = $1', [id]);
    const stored = JSON.stringify(row);
    const response = JSON.stringify(await jsonOf(await admin.request('GET', `/builds/${id}`)));
    const handed = runner.specs.get(id)!.config.secrets!;

    expect(stored).not.toContain(VALUE);
    expect(stored).not.toContain(Buffer.from(VALUE).toString('base64'));
    expect(stored).toContain(SEALED_PREFIX);
    expect(response).not.toContain(VALUE);
    // The runner is handed the sealed spec and unseals it right before the build runs.
    expect(handed.NPM_TOKEN!.startsWith(SEALED_PREFIX)).toBe(true);
    expect(kiln.app.get(SecretSealer).unseal(handed.NPM_TOKEN!)).toBe(VALUE);
  });
});
