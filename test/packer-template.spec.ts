import { BuildRunner } from '../src/runners/build-runner.js';
import { LocalRunner } from '../src/runners/local/local.runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Issue 14, item 3: a packer manifest's builders, provisioners and post-processors are checked
 * against its template when the build is created, HCL2 templates included. The local runner has
 * no check of its own: every build reaches it through POST /builds, so the app here runs with the
 * local runner, over real HTTP and a real Postgres.
 */
describe('packer templates at POST /builds', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  const HCL_TEMPLATE = `variable "region" {
  type    = string
  default = "eu-west-1"
}

source "amazon-ebs" "base" {
  region = var.region
}

build {
  sources = ["source.amazon-ebs.base"]

  provisioner "shell" {
    inline = ["echo hi"]
  }

  post-processor "manifest" {}
}
`;

  beforeAll(async () => {
    kiln = await startTestApp();
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

  function create(buildConfig: Record<string, unknown>): Promise<Response> {
    const manifest = wizardManifest('packer');
    Object.assign(manifest['build_config'] as object, buildConfig);
    return admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
  }

  async function buildCount(): Promise<number> {
    const [row] = await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds');
    return row.n as number;
  }

  it('runs with the local runner', () => {
    expect(kiln.app.get(BuildRunner)).toBeInstanceOf(LocalRunner);
  });

  it('refuses builders an HCL2 template does not declare, naming the field and the template’s sources', async () => {
    const before = await buildCount();

    const response = await create({
      packer_template: HCL_TEMPLATE,
      builders: [{ type: 'googlecompute', project_id: 'p' }],
      provisioners: [{ type: 'shell' }],
    });

    expect(response.status).toBe(400);
    expect(await jsonOf(response)).toMatchObject({
      code: 'INVALID_REQUEST',
      details: {
        'manifest.build_config.builders':
          'entry 0: no builder of type "googlecompute" (the template declares source.amazon-ebs.base)',
      },
    });
    expect(await buildCount()).toBe(before);
  });

  it('refuses provisioners and post-processors an HCL2 template does not declare', async () => {
    const response = await create({
      packer_template: HCL_TEMPLATE,
      provisioners: ['ansible'],
      post_processors: [['manifest', 'docker-push']],
    });

    expect(response.status).toBe(400);
    expect((await jsonOf(response)).details).toEqual({
      'manifest.build_config.provisioners':
        'entry 0: no provisioner of type "ansible" (the template declares shell)',
      'manifest.build_config.post_processors':
        'entry 0.1: no post-processor of type "docker-push" (the template declares manifest)',
    });
  });

  it('refuses a template that is neither JSON nor HCL2 with the parser’s line and column', async () => {
    const response = await create({
      packer_template: 'source "amazon-ebs" "base" {\n  region =\n}\n',
    });

    expect(response.status).toBe(400);
    expect((await jsonOf(response)).details).toEqual({
      'manifest.build_config.packer_template': expect.stringMatching(
        /^is neither JSON nor valid HCL2: template\.pkr\.hcl:2,\d+-\d+,\d+: Invalid expression/,
      ),
    });
  });

  it('creates a build whose entries the HCL2 template declares, keeping them as sent', async () => {
    const builders = [{ type: 'amazon-ebs', name: 'base', region: 'eu-west-1' }];

    const response = await create({
      packer_template: HCL_TEMPLATE,
      builders,
      provisioners: [{ type: 'shell', inline: ['echo hi'] }],
      post_processors: ['manifest'],
    });

    expect(response.status).toBe(201);
    const { data } = await jsonOf(response);
    const [row] = await kiln.dataSource.query('SELECT config, spec FROM builds WHERE id = $1', [
      data.id,
    ]);
    expect(row.config.manifest.build_config.builders).toEqual(builders);
    expect(row.spec.config.packer_template).toBe(HCL_TEMPLATE);
  });
});
