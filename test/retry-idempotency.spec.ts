import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, distinct, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** Issue 10, item 6: a failed build has at most one active retry, whatever its form. */
describe('retry idempotency', () => {
  let kiln: TestApp;
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

  async function failedWizardBuild(): Promise<string> {
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: distinct(wizardManifest('kaniko')),
    });
    expect(created.status).toBe(201);
    const { data } = await jsonOf(created);
    expect((await admin.request('POST', `/builds/${data.id}/start`)).status).toBe(200);
    await runner.fail(data.id);
    return data.id as string;
  }

  async function retriesOf(id: string): Promise<Array<{ id: string; status: string }>> {
    return kiln.dataSource.query('SELECT id, status FROM builds WHERE retry_of = $1', [id]);
  }

  it('creates one build for twenty concurrent retries of a failed wizard-form build; the rest get 409 naming it', async () => {
    const failed = await failedWizardBuild();

    const responses = await Promise.all(
      Array.from({ length: 20 }, () => admin.request('POST', `/builds/${failed}/retry`)),
    );

    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(19);
    const retries = await retriesOf(failed);
    expect(retries).toHaveLength(1);
    for (const response of responses.filter((r) => r.status === 409)) {
      expect(await jsonOf(response)).toMatchObject({
        code: 'CONFLICT',
        details: { build_id: retries[0]!.id },
      });
    }
  });

  it('refuses a second sequential retry while the first is queued or running, naming it', async () => {
    const failed = await failedWizardBuild();
    const first = await jsonOf(await admin.request('POST', `/builds/${failed}/retry`));

    const whileQueued = await admin.request('POST', `/builds/${failed}/retry`);
    expect((await admin.request('POST', `/builds/${first.id}/start`)).status).toBe(200);
    const whileRunning = await admin.request('POST', `/builds/${failed}/retry`);

    for (const response of [whileQueued, whileRunning]) {
      expect(response.status).toBe(409);
      expect(await jsonOf(response)).toMatchObject({
        details: { build_id: first.id },
      });
    }
    expect(await retriesOf(failed)).toHaveLength(1);
  });

  it('allows a new retry once the previous retry has ended', async () => {
    const failed = await failedWizardBuild();
    const first = await jsonOf(await admin.request('POST', `/builds/${failed}/retry`));
    const firstId = first.id as string;
    await admin.request('POST', `/builds/${firstId}/start`);
    await runner.fail(firstId);

    const second = await admin.request('POST', `/builds/${failed}/retry`);

    expect(second.status).toBe(200);
    expect((await retriesOf(failed)).map((build) => build.status).sort()).toEqual([
      'failed',
      'queued',
    ]);
  });

  it('keeps reference-form retries to one as well', async () => {
    const build = await admin.createBuild(seeded.projectA, 'retry-reference');
    await admin.request('POST', `/builds/${build.id}/start`);
    await runner.fail(build.id);

    const responses = await Promise.all(
      Array.from({ length: 10 }, () => admin.request('POST', `/builds/${build.id}/retry`)),
    );

    expect(responses.filter((response) => response.status === 200)).toHaveLength(1);
    expect(await retriesOf(build.id)).toHaveLength(1);
  });
});
