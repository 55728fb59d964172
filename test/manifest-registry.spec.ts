import { ProjectsService } from '../src/projects/projects.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Issue 10, item 9: a kaniko manifest with only the required fields (no
 * registry_repository) is accepted when tags or a default registry give a repository.
 */
describe('kaniko manifests without registry_repository', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
  });

  afterAll(async () => {
    await kiln.close();
  });

  function specManifest(tags: string): Record<string, any> {
    const manifest = wizardManifest('kaniko') as Record<string, any>;
    delete manifest['build_config'].registry_repository;
    return { ...manifest, tags };
  }

  async function create(projectId: string, tags: string): Promise<Response> {
    return admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: projectId,
      manifest: specManifest(tags),
    });
  }

  async function buildCount(): Promise<number> {
    const [row] = await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds');
    return row.n as number;
  }

  it('refuses it with the spec message when no tag, project or kiln default gives a repository', async () => {
    const before = await buildCount();

    const response = await create(seeded.projectA, 'latest, v1');

    expect(response.status).toBe(400);
    expect(await jsonOf(response)).toMatchObject({
      code: 'INVALID_REQUEST',
      details: {
        'manifest.build_config.registry_repository':
          'Registry repository is required for Kaniko builds',
      },
    });
    expect(await buildCount()).toBe(before);
  });

  it('accepts it when a tag is a full image reference', async () => {
    const response = await create(seeded.projectA, 'v1, harbor.example.com/team/app:v1');

    expect(response.status).toBe(201);
  });

  it('accepts it when the project has a default registry', async () => {
    const project = await kiln.app
      .get(ProjectsService)
      .create(seeded.tenantA, 'with-registry', undefined, 'registry.example.com/team');

    const response = await create(project.id, 'v1');

    expect(response.status).toBe(201);
  });
});

describe('kaniko manifests without registry_repository, with kiln default registry', () => {
  let kiln: TestApp;

  afterAll(async () => {
    await kiln.close();
  });

  it('accepts it when KILN_LOCAL_REGISTRY gives kiln a default registry', async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_LOCAL_REGISTRY: '127.0.0.1:5000/kiln' },
    });
    const seeded = await seedTenancy(kiln);
    const admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const manifest = wizardManifest('kaniko') as Record<string, any>;
    delete manifest['build_config'].registry_repository;

    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: { ...manifest, tags: 'v1' },
    });

    expect(response.status).toBe(201);
  });
});
