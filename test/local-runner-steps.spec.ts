import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { arch } from 'node:os';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FAKE_FINDING, fakeStepToolBin } from './support/fake-step-tools.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { processesMentioning } from './support/processes.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** In kiln's own environment while the suite runs: no step tool may see it (the fakes check). */
const KILN_SECRET = 'kiln-jwt-secret-that-no-step-tool-may-see';
const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

const HOST_PLATFORM = `linux/${arch() === 'x64' ? 'amd64' : arch()}`;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', tool]).status === 0;
}

/** A kiln with the local runner, a project building `repo`, and an admin's client. */
async function localKiln(
  repo: GitRepo,
  env: Record<string, string>,
): Promise<{ kiln: TestApp; seeded: Seeded; admin: ApiClient }> {
  const kiln = await startTestApp({ env: { KILN_RUNNER: 'local', ...env } });
  const seeded = await seedTenancy(kiln);
  // A file:// repository is fine for a test; the API accepts only network URLs.
  await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
    repo.url,
    seeded.projectA,
  ]);
  const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
  return { kiln, seeded, admin: new ApiClient(kiln, token, seeded.tenantA) };
}

describe('the local runner’s SBOM and scan steps (real buildah, registry and API; fake tool CLIs)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-steps-');
  const bin = fakeStepToolBin();
  const saved = { ...process.env };
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('main', { 'hello.txt': 'hello\n' });
    // As in production, kiln's process environment holds what its configuration was read from.
    process.env['KILN_JWT_SECRET'] = KILN_SECRET;
    ({ kiln, seeded, admin } = await localKiln(repo, {
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      KILN_DATA_DIR: dataDir,
      KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
      KILN_CANCEL_GRACE_SECONDS: '2',
    }));
  }, 60_000);

  afterAll(async () => {
    await kiln.close();
    await registry.stop();
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
    await rm(dataDir, { recursive: true, force: true });
    await rm(bin, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  /** A wizard build of `hello.txt` pushed to the test registry as `kiln/<name>`, started. */
  async function startBuild(
    client: ApiClient,
    projectId: string,
    name: string,
    buildConfig: Record<string, unknown>,
    beforeStart: (id: string) => Promise<void> = async () => {},
  ): Promise<string> {
    const manifest = wizardManifest('kaniko');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
      registry_repository: `${registry.address}/kiln/${name}`,
      ...buildConfig,
    });
    const response = await client.request('POST', '/builds', {
      tenant_id: client.tenantId,
      project_id: projectId,
      manifest,
    });
    const body = await jsonOf(response);
    if (response.status !== 201)
      throw new Error(`create gave ${response.status}: ${JSON.stringify(body)}`);
    const id = body.data.id as string;
    await beforeStart(id);
    expect((await client.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  async function finished(client: ApiClient, id: string, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const build = await jsonOf(await client.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await sleep(200);
    }
  }

  async function messagesOf(client: ApiClient, id: string): Promise<string[]> {
    const { logs } = await jsonOf(await client.request('GET', `/builds/${id}/logs?limit=1000`));
    return logs.map((line: { message: string }) => line.message);
  }

  async function failureReasonOf(id: string): Promise<string | null> {
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      id,
    ]);
    return row.failure_reason;
  }

  /** `kiln/<name>@sha256:…` as the registry has the tag (`latest`) now. */
  async function pushedReference(name: string, tag = 'latest'): Promise<string> {
    const response = await fetch(`http://${registry.address}/v2/kiln/${name}/manifests/${tag}`, {
      method: 'HEAD',
      headers: { accept: MANIFEST_TYPES },
    });
    expect(response.status).toBe(200);
    return `${registry.address}/kiln/${name}@${response.headers.get('docker-content-digest')}`;
  }

  it('describes and scans the pushed image by its digest, and serves the SBOM and the findings', async () => {
    const id = await startBuild(admin, seeded.projectA, 'described', {
      sbom_tool: 'syft',
      scan_tool: 'trivy',
    });

    const build = await finished(admin, id);

    expect(build).toMatchObject({ status: 'success', error_message: null });
    const reference = await pushedReference('described');
    // The build shows what the registry serves under each of its tags (latest, v1).
    const digest = reference.split('@')[1];
    expect(await pushedReference('described', 'v1')).toBe(reference);
    expect(build).toMatchObject({
      image_digest: digest,
      images: ['latest', 'v1'].map((tag) => `${registry.address}/kiln/described:${tag}@${digest}`),
    });
    const messages = await messagesOf(admin, id);
    expect(messages).toEqual(
      expect.arrayContaining([
        `[kiln] the SBOM step runs syft against ${reference}`,
        `syft: looking at ${reference}`,
        `trivy: looking at ${reference}`,
      ]),
    );
    const sbom = await admin.request('GET', `/builds/${id}/sbom`);
    expect(sbom.status).toBe(200);
    expect(await jsonOf(sbom)).toMatchObject({
      build_id: id,
      tool: 'syft',
      format: 'spdx-json',
      truncated: false,
      document: { spdxVersion: 'SPDX-2.3', name: reference },
    });
    const scan = await admin.request('GET', `/builds/${id}/scan`);
    expect(scan.status).toBe(200);
    expect(await jsonOf(scan)).toMatchObject({
      build_id: id,
      tool: 'trivy',
      findings: [
        { id: FAKE_FINDING.id, package: FAKE_FINDING.package, severity: expect.any(String) },
      ],
      policy: null,
    });
  });

  it('fails a build whose findings break its scan policy as PolicyViolation, leaving the image pushed', async () => {
    const id = await startBuild(admin, seeded.projectA, 'violating', {
      sbom_tool: 'syft',
      scan_tool: 'trivy',
      scan_policy: { fail_on: 'high' },
    });

    const build = await finished(admin, id);

    expect(build.status).toBe('failed');
    expect(await failureReasonOf(id)).toBe('PolicyViolation');
    expect(build.error_message).toContain(FAKE_FINDING.id);
    expect(build.error_message).toMatch(/image was pushed and stays in the registry/);
    expect(await registry.tags('kiln/violating')).toContain('latest');
    // What it pushed is on the build, so users can find the image and remove it.
    const reference = await pushedReference('violating');
    const digest = reference.split('@')[1];
    expect(build).toMatchObject({
      image_digest: digest,
      images: ['latest', 'v1'].map((tag) => `${registry.address}/kiln/violating:${tag}@${digest}`),
    });
    const scan = await jsonOf(await admin.request('GET', `/builds/${id}/scan`));
    expect(scan.policy).toMatchObject({ fail_on: 'high', violated: true });
  });

  it('keeps a build whose SBOM tool fails, saying so with its exit code, and still scans', async () => {
    const id = await startBuild(admin, seeded.projectA, 'sbom-fails', {
      sbom_tool: 'grype',
      scan_tool: 'trivy',
    });

    const build = await finished(admin, id);

    expect(build).toMatchObject({ status: 'success', error_message: null });
    const messages = await messagesOf(admin, id);
    expect(messages).toEqual(
      expect.arrayContaining([
        'fake grype: failed to pull the image: connection reset by peer',
        'WARN: [kiln] the SBOM step failed: grype exited with code 2; nothing from it is stored',
      ]),
    );
    expect((await admin.request('GET', `/builds/${id}/sbom`)).status).toBe(404);
    expect((await admin.request('GET', `/builds/${id}/scan`)).status).toBe(200);
  });

  it('keeps a build whose SBOM kiln refuses, saying why in the log', async () => {
    const id = await startBuild(admin, seeded.projectA, 'refused', {
      sbom_tool: 'syft',
      scan_tool: 'trivy',
    });

    const build = await finished(admin, id);

    expect(build).toMatchObject({ status: 'success', error_message: null });
    expect(await messagesOf(admin, id)).toContainEqual(
      expect.stringMatching(
        /^WARN: \[kiln\] kiln did not store the SBOM from syft: The SBOM is not usable: /,
      ),
    );
    expect((await admin.request('GET', `/builds/${id}/sbom`)).status).toBe(404);
    expect((await admin.request('GET', `/builds/${id}/scan`)).status).toBe(200);
  });

  it('says in the log that the steps need a pushed image when nothing was pushed', async () => {
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
      platforms: [HOST_PLATFORM],
    });
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    const { id } = (await jsonOf(response)).data;
    await admin.request('POST', `/builds/${id}/start`);

    const build = await finished(admin, id);

    expect(build).toMatchObject({ status: 'success', error_message: null });
    expect(await messagesOf(admin, id)).toContain(
      '[kiln] the SBOM (syft) and scan (trivy) steps are skipped: they need a pushed image, and this build pushed none (no registry is configured)',
    );
    expect((await admin.request('GET', `/builds/${id}/sbom`)).status).toBe(404);
  });

  it('stops a running step tool when the build is cancelled, leaving no process behind', async () => {
    const id = await startBuild(admin, seeded.projectA, 'slow', {
      sbom_tool: 'syft',
      scan_tool: 'trivy',
    });
    const deadline = Date.now() + 60_000;
    while (!(await messagesOf(admin, id)).includes('fake syft: sleeping')) {
      if (Date.now() > deadline) throw new Error('the SBOM step never started');
      await sleep(200);
    }
    expect(processesMentioning(id).length).toBeGreaterThan(0);

    const cancelled = await admin.request('POST', `/builds/${id}/cancel`, { reason: 'enough' });

    expect(cancelled.status).toBe(200);
    expect((await finished(admin, id)).status).toBe('cancelled');
    expect(processesMentioning(id)).toEqual([]);
    expect(await messagesOf(admin, id)).not.toContainEqual(expect.stringMatching(/trivy/));
  });

  it("stops a running step tool when the build outlives its spec's timeout, failing it as TimedOut", async () => {
    // The timeout is captured in the spec at create (KILN_BUILD_TIMEOUT_SECONDS): shorten it to
    // well past what building and pushing this image takes (under 5 s on a loaded machine), and
    // well short of the tool's sleep. The test waits all of it out.
    const id = await startBuild(
      admin,
      seeded.projectA,
      'slow-timeout',
      { sbom_tool: 'syft', scan_tool: 'trivy' },
      (created) =>
        kiln.dataSource.query(
          `UPDATE builds SET spec = jsonb_set(spec, '{timeoutSeconds}', '12') WHERE id = $1`,
          [created],
        ),
    );

    const build = await finished(admin, id, 90_000);

    expect(build.status).toBe('failed');
    expect(build.error_message).toMatch(/ran longer than its timeout of 12 s/);
    expect(await failureReasonOf(id)).toBe('TimedOut');
    expect(await messagesOf(admin, id)).toContain('fake syft: sleeping');
    expect(processesMentioning(id)).toEqual([]);
  });

  const toolsInstalled = ['syft', 'trivy'].filter(onPath);
  if (toolsInstalled.length > 0) {
    console.warn(
      `local-runner-steps.spec: skipping the missing-CLI case: ${toolsInstalled.join(', ')} installed`,
    );
  }

  describe('on a machine without the tools', () => {
    let bare: { kiln: TestApp; seeded: Seeded; admin: ApiClient };

    beforeAll(async () => {
      bare = await localKiln(repo, {
        KILN_DATA_DIR: `${dataDir}/bare`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
      });
    }, 60_000);

    afterAll(async () => {
      await bare.kiln.close();
    });

    (toolsInstalled.length === 0 ? it : it.skip)(
      'builds and pushes the image, saying in the log that each step is skipped',
      async () => {
        const id = await startBuild(bare.admin, bare.seeded.projectA, 'bare', {
          sbom_tool: 'syft',
          scan_tool: 'trivy',
        });

        const build = await finished(bare.admin, id);

        expect(build).toMatchObject({ status: 'success', error_message: null });
        expect(await registry.tags('kiln/bare')).toContain('latest');
        expect(await messagesOf(bare.admin, id)).toEqual(
          expect.arrayContaining([
            '[kiln] the SBOM step is skipped: syft is not installed on this machine (kiln looked on PATH)',
            '[kiln] the scan step is skipped: trivy is not installed on this machine (kiln looked on PATH)',
          ]),
        );
        expect((await bare.admin.request('GET', `/builds/${id}/sbom`)).status).toBe(404);
        expect((await bare.admin.request('GET', `/builds/${id}/scan`)).status).toBe(404);
      },
    );
  });
});
