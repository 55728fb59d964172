import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, distinct, wizardManifest } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import {
  cacheDirOf,
  containersIn,
  fileInTopLayer,
  imagesIn,
  layersIn,
} from './support/layer-cache.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** A busybox base, then the step whose layer marks whose cache it is. */
const dockerfile = (marker: string) =>
  [
    'FROM scratch',
    'COPY busybox /bin/busybox',
    'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
    `RUN echo ${marker} > /m`,
    '',
  ].join('\n');

describe('the local runner’s layer cache (real buildah, real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-cache-');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let a: ApiClient;
  let b: ApiClient;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('main', { busybox: { copyFrom: '/bin/busybox' } });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_LOCAL_MAX_PARALLEL: '2',
        KILN_CANCEL_GRACE_SECONDS: '2',
      },
    });
    seeded = await seedTenancy(kiln);
    // A file:// repository is fine for a test; the API accepts only network URLs.
    await kiln.dataSource.query(
      'UPDATE projects SET git_repository_url = $1 WHERE id IN ($2, $3)',
      [repo.url, seeded.projectA, seeded.projectB],
    );
    a = new ApiClient(kiln, await tokenFor(kiln.baseUrl, seeded.users.admin.email), seeded.tenantA);
    b = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
  }, 60_000);

  afterAll(async () => {
    await kiln.close();
    await registry.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  const cacheA = () => cacheDirOf(dataDir, seeded.tenantA, seeded.projectA);
  const cacheB = () => cacheDirOf(dataDir, seeded.tenantB, seeded.projectB);

  /** A wizard build of `file` pushed to the test registry as `kiln/<name>`, started. */
  async function startBuild(
    client: ApiClient,
    projectId: string,
    name: string,
    text: string,
    buildConfig: Record<string, unknown> = {},
  ): Promise<string> {
    const manifest = distinct(wizardManifest('kaniko'));
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: text,
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
    expect((await client.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  async function finished(client: ApiClient, id: string, timeoutMs = 120_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const build = await jsonOf(await client.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  async function succeeded(client: ApiClient, id: string): Promise<any> {
    const build = await finished(client, id);
    if (build.status !== 'success') {
      throw new Error(
        `build ${id} ${build.status}: ${build.error_message}\n${(await messagesOf(client, id)).join('\n')}`,
      );
    }
    return build;
  }

  async function messagesOf(client: ApiClient, id: string): Promise<string[]> {
    const { logs } = await jsonOf(await client.request('GET', `/builds/${id}/logs?limit=1000`));
    return logs.map((line: { message: string }) => line.message);
  }

  const usingCache = (messages: string[]) =>
    messages.filter((m) => m.startsWith('--> Using cache'));

  it("never lets tenant B's build reuse tenant A's layers: B runs every step in a cache of its own", async () => {
    await succeeded(a, await startBuild(a, seeded.projectA, 'isolated-a', dockerfile('A-marker')));
    const layersOfA = layersIn(join(cacheA(), 'storage'));
    const imagesOfA = imagesIn(cacheA());
    expect(layersOfA).not.toEqual([]);

    const idB = await startBuild(b, seeded.projectB, 'isolated-b', dockerfile('A-marker'));
    await succeeded(b, idB);

    const messages = await messagesOf(b, idB);
    expect(usingCache(messages)).toEqual([]);
    expect(messages).toContain('[kiln] layer cache: 0 of 4 steps from the cache; every step ran');
    expect(cacheB()).toContain(seeded.tenantB);
    const layersOfB = layersIn(join(cacheB(), 'storage'));
    expect(layersOfB).not.toEqual([]);
    expect(layersOfB.filter((layer) => layersOfA.includes(layer))).toEqual([]);
    const imagesOfB = imagesIn(cacheB());
    expect(imagesOfB.filter((image) => imagesOfA.includes(image))).toEqual([]);
    // Nothing of B's went to A's cache either.
    expect(layersIn(join(cacheA(), 'storage')).sort()).toEqual([...layersOfA].sort());
  }, 240_000);

  it('reuses every step of an unchanged Dockerfile in a second build of the project, and says so', async () => {
    await succeeded(a, await startBuild(a, seeded.projectA, 'again', dockerfile('again')));

    const second = await startBuild(a, seeded.projectA, 'again', dockerfile('again'));
    await succeeded(a, second);

    const messages = await messagesOf(a, second);
    expect(usingCache(messages)).toHaveLength(3);
    expect(messages).toContain(
      "[kiln] layer cache: on; steps this project's earlier builds ran are reused",
    );
    expect(messages).toContain('[kiln] layer cache: 3 of 4 steps from the cache (STEP 2, 3, 4)');
  }, 240_000);

  it('reuses nothing with cache: false, and keeps nothing in the project’s cache', async () => {
    await succeeded(a, await startBuild(a, seeded.projectA, 'uncached', dockerfile('uncached')));
    const imagesBefore = imagesIn(cacheA());

    const id = await startBuild(a, seeded.projectA, 'uncached', dockerfile('uncached'), {
      cache: false,
    });
    await succeeded(a, id);

    const messages = await messagesOf(a, id);
    expect(usingCache(messages)).toEqual([]);
    expect(messages).toContain(
      '[kiln] layer cache: off (the manifest says cache: false); every step runs, and no layer is reused or kept for later builds',
    );
    expect(messages.some((m) => m.startsWith('[kiln] layer cache: 0 of'))).toBe(false);
    expect(imagesIn(cacheA()).sort()).toEqual(imagesBefore.sort());
    // Its image is in a store of its own, kept until the build is deleted.
    expect(existsSync(join(dataDir, 'builds', id, 'storage'))).toBe(true);
  }, 240_000);

  it('runs two builds of one project at once in its cache, each making its own image', async () => {
    const [one, two] = await Promise.all([
      startBuild(a, seeded.projectA, 'together-one', dockerfile('together-one')),
      startBuild(a, seeded.projectA, 'together-two', dockerfile('together-two')),
    ]);

    const [builtOne, builtTwo] = await Promise.all([succeeded(a, one), succeeded(a, two)]);

    for (const [build, name] of [
      [builtOne, 'together-one'],
      [builtTwo, 'together-two'],
    ] as const) {
      expect(await fileInTopLayer(registry.address, `kiln/${name}`, build.image_digest, 'm')).toBe(
        `${name}\n`,
      );
    }
    // Both used the project's cache; neither left a working container in it.
    expect(imagesIn(cacheA())).not.toEqual([]);
    expect(containersIn(cacheA())).toEqual([]);
  }, 240_000);

  it("leaves no working container in the project's cache when a build is cancelled mid-step", async () => {
    const text = dockerfile('cancelled').replace(/\n$/, '\nRUN sleep 60\n');
    const id = await startBuild(a, seeded.projectA, 'cancelled', text);
    const deadline = Date.now() + 120_000;
    while (!(await messagesOf(a, id)).some((m) => m.startsWith('STEP 5/5: RUN sleep 60'))) {
      if (Date.now() > deadline) throw new Error('the sleep step never started');
      await new Promise((done) => setTimeout(done, 100));
    }
    // bud's working container for the step is in the cache while it runs.
    expect(containersIn(cacheA())).not.toEqual([]);

    expect((await a.request('POST', `/builds/${id}/cancel`)).status).toBe(200);

    expect((await finished(a, id)).status).toBe('cancelled');
    expect(containersIn(cacheA())).toEqual([]);
  }, 240_000);

  it("deleting a build removes its image from the project's cache", async () => {
    const id = await startBuild(a, seeded.projectA, 'deleted', dockerfile('deleted'));
    await succeeded(a, id);
    const named = () => imagesIn(cacheA()).length;
    const before = named();

    expect((await a.request('DELETE', `/builds/${id}`)).status).toBe(204);

    // Its image and the parent images only it needed (the `deleted` marker step) are gone.
    expect(named()).toBeLessThan(before);
    expect(existsSync(join(dataDir, 'builds', id))).toBe(false);
  }, 240_000);
});
