import type { V1ObjectMeta } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KANIKO_IMAGE } from '../src/build-methods/images.js';
import { REGISTRY_CONFIG_KEY } from '../src/build-methods/job.js';
import { paketoBuilderImage } from '../src/build-methods/paketo.js';
import { UPLOAD_TOKEN_PREFIX } from '../src/build-methods/steps.js';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { KILN_LABELS } from '../src/operator/api/build-resource.js';
import { wizardManifest } from './support/builds.js';
import { FakeTokenRegistry } from './support/fake-token-registry.js';
import { FakeVault } from './support/fake-vault.js';
import { auditCredentials } from './support/credential-audit.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import type { StoredEvent } from './support/kube/store.js';
import { FAST_LEASE_ENV } from './support/operator-process.js';
import { BUILDS_PATH, NS, OperatorGround, until } from './support/operator-ground.js';

noteDoubleOnly('the build’s Secret and its Job');

const PAKETO_BUILDER = 'paketobuildpacks/builder:base';
const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;

let ground: OperatorGround;
let vault: FakeVault;
let registry: FakeTokenRegistry;
let files: string;

/**
 * Issue 27 item 4: a build's Secret (registry credentials, upload tokens, git credentials,
 * resolved secrets) is its Job's, so that Kubernetes' garbage collector deletes it with the Job,
 * whether or not the build has a ConfigMap, whoever created the Job, and when the patch that
 * makes it the Job's fails for a while. The operator runs the steps after the image (upload
 * tokens) and removes each Job once its log is stored (KILN_OPERATOR_JOB_TTL_SECONDS=0, the
 * double's TTL controller), so every test ends where a real cluster would: the Job gone.
 */
describe('the build’s Secret goes with its Job', () => {
  // The robot's credentials and kiln's Vault token: shown to no one, whatever happens to the Job.
  const audit = auditCredentials((found) => ground.showTo(found));

  beforeAll(async () => {
    [ground, vault, registry] = await Promise.all([
      OperatorGround.start('operator-secret-ownership'),
      FakeVault.start(),
      FakeTokenRegistry.start(),
    ]);
    files = mkdtempSync(join(tmpdir(), 'kiln-secret-ownership-'));
    // The tenant's registry with robot credentials (from Vault): every build gets a Docker config.
    const token = audit.register(`hvs.${randomBytes(12).toString('hex')}`);
    vault.addToken(token, { policies: ['kv/'] });
    const tokenFile = join(files, 'vault-token');
    writeFileSync(tokenFile, token);
    const password = randomBytes(18).toString('base64url');
    audit.registerPair('robot$team+ci', password);
    vault.put('kv', 'registry/robot', { username: 'robot$team+ci', password });
    registry.addUser('robot$team+ci', password, { 'team/app': ['pull', 'push'] });
    const integrations = new IntegrationsService(new IntegrationsRepository(ground.api.dataSource));
    await integrations.setSecretManager(ground.seeded.tenantA, 'vault', {
      address: vault.url,
      auth: { method: 'token', tokenFile },
    });
    await integrations.setRegistry(ground.seeded.tenantA, 'harbor', {
      address: registry.address,
      insecure: true,
      username: 'vault:kv/data/registry/robot#username',
      password: 'vault:kv/data/registry/robot#password',
    });
  });

  afterEach(() => ground.reset());

  afterAll(async () => {
    await Promise.all([ground?.close(), vault?.stop(), registry?.stop()]);
    rmSync(files, { recursive: true, force: true });
  });

  const repository = (): string => `${registry.address}/team/app`;

  /** An operator that runs the steps and lets Kubernetes remove a Job once its log is stored. */
  const operatorEnv = {
    KILN_STEP_IMAGE: STEP_IMAGE,
    KILN_OPERATOR_JOB_TTL_SECONDS: '0',
    ...FAST_LEASE_ENV,
  };
  const startOperator = (through: Parameters<OperatorGround['startOperator']>[0] = {}) =>
    ground.startOperator({
      ...through,
      env: { ...operatorEnv, KILN_UPLOAD_URL: ground.api.baseUrl },
    });

  /** A wizard build pushing to the tenant's registry, created through the API (not started). */
  async function created(method: 'kaniko' | 'paketo'): Promise<string> {
    const manifest = wizardManifest(method);
    // A tag of its own: no build of an earlier test is its duplicate (ADR 0030).
    manifest['tags'] = `latest, t${Date.now()}`;
    if (method === 'paketo') manifest['environment'] = {};
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      registry_repository: repository(),
      ...(method === 'paketo'
        ? { paketo_config: { builder: PAKETO_BUILDER, buildpacks: [] } }
        : {}),
    });
    const response = await ground.admin.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantA,
      project_id: ground.seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { data: { id: string } }).data.id;
  }

  async function start(id: string): Promise<void> {
    expect((await ground.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
  }

  /** Builders that take about two seconds: the Secret is there to be read while they run. */
  function slowBuilders(): void {
    for (const image of [KANIKO_IMAGE, paketoBuilderImage(PAKETO_BUILDER).image])
      ground.cluster.kubelet.script(image, { lines: 10, linesPerSecond: 5 });
  }

  /** Each Secret and ConfigMap of the build still in the cluster: its name and owners. */
  function childrenOf(id: string): Array<{ kind: string; name: string; owners: string[] }> {
    return (['secrets', 'configmaps'] as const).flatMap((plural) =>
      ground.cluster
        .objects('v1', plural, NS)
        .filter(
          (object) =>
            object.metadata.name === `kiln-${id}` ||
            object.metadata.labels?.[KILN_LABELS.buildId] === id,
        )
        .map((object) => ({
          kind: object.kind ?? plural,
          name: object.metadata.name ?? '',
          owners: ((object.metadata as V1ObjectMeta).ownerReferences ?? []).map(
            (o) => `${o.kind}/${o.name}${o.controller === true ? ' (controller)' : ''}`,
          ),
        })),
    );
  }

  /** The keys of the build's Secret, read while it exists (before its Job is removed). */
  async function secretKeysOf(id: string): Promise<string[]> {
    const secret = await until('the build’s Secret', () => ground.buildSecret(id));
    return Object.keys(secret.data ?? {}).sort();
  }

  /** The Job removed (its TTL, after the log is stored) and the garbage collector done. */
  async function jobRemoved(id: string): Promise<void> {
    await until('the Job to be removed after its TTL', () => ground.jobOf(id) === undefined);
    await ground.cluster.settled();
  }

  it('a reference-form build (the repository’s Dockerfile, no ConfigMap) with registry credentials and steps: once its Job is deleted, no Secret of it remains', async () => {
    await startOperator();
    slowBuilders();
    // As `kubectl apply` writes it: the reference form, kaniko building the repository's own
    // Dockerfile, pushing to the tenant's registry, with an SBOM and a scan after the image.
    const name = `reference-${Date.now()}`;
    const applied = await fetch(`${ground.cluster.url}${BUILDS_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name, namespace: NS },
        spec: {
          tenantId: ground.seeded.tenantA,
          projectId: ground.seeded.projectA,
          form: 'reference',
          method: 'kaniko',
          source: { repository: 'https://git.example.com/team/app.git', branch: 'main' },
          output: { image: repository(), tags: ['v1'], registry: 'harbor' },
          sbomTool: 'syft',
          scanTool: 'trivy',
          secretManager: 'vault',
        },
      }),
    });
    expect(applied.status).toBe(201);
    const id = await until(
      'registration',
      () => ground.resource(name)?.status?.buildId as string | undefined,
    );

    expect(await secretKeysOf(id)).toEqual([
      REGISTRY_CONFIG_KEY,
      `${UPLOAD_TOKEN_PREFIX}sbom`,
      `${UPLOAD_TOKEN_PREFIX}scan`,
    ]);
    expect(ground.cluster.object('v1', 'configmaps', NS, `kiln-${id}`)).toBeUndefined();
    const build = await ground.ended(id);
    expect(build.status).toBe('success');
    await ground.expectMirrored(name, 'success');
    await jobRemoved(id);

    expect(childrenOf(id)).toEqual([]);
  });

  it('a paketo build without environment (no ConfigMap): the Job controls its Secret, which goes with it', async () => {
    await startOperator();
    slowBuilders();
    const id = await created('paketo');
    await start(id);

    expect(await secretKeysOf(id)).toEqual([
      REGISTRY_CONFIG_KEY,
      `${UPLOAD_TOKEN_PREFIX}sbom`,
      `${UPLOAD_TOKEN_PREFIX}scan`,
    ]);
    const job = await until('the Job', () => ground.jobOf(id));
    await until('the Job to control the build’s Secret', () =>
      ground
        .buildSecret(id)
        ?.metadata?.ownerReferences?.some(
          (o) => o.kind === 'Job' && o.uid === job.metadata?.uid && o.controller === true,
        ),
    );
    expect((await ground.ended(id)).status).toBe('success');
    await jobRemoved(id);

    expect(childrenOf(id)).toEqual([]);
  });

  it('the patch owning the Secret fails twice (503, then 429): retried, the Secret ends the Job’s, and goes with it', async () => {
    await startOperator();
    slowBuilders();
    const id = await created('paketo');
    const secretPath = `/api/v1/namespaces/${NS}/secrets/kiln-${id}`;
    ground.cluster.failNext(secretPath, 503, { method: 'PATCH' });
    ground.cluster.failNext(secretPath, 429, { method: 'PATCH', retryAfterSeconds: 0 });
    await start(id);

    const job = await until('the Job', () => ground.jobOf(id));
    await until('the Job to control the build’s Secret', () =>
      ground
        .buildSecret(id)
        ?.metadata?.ownerReferences?.some(
          (o) => o.kind === 'Job' && o.uid === job.metadata?.uid && o.controller === true,
        ),
    );
    // The premise: both faults were met, and the third patch went through.
    expect(ground.cluster.requestCount(secretPath, 'PATCH')).toBeGreaterThanOrEqual(3);
    expect((await ground.ended(id)).status).toBe('success');
    // The JobCreated Event and kiln's notes are written once, before the ownership patches.
    expect(ground.jobsCreated(id)).toBe(1);
    await jobRemoved(id);

    expect(childrenOf(id)).toEqual([]);
  });

  it('the operator cut off from the API server as its Job is created (before any ownership patch): the next operator adopts the Job and makes it the controller of the Secret and the ConfigMap', async () => {
    // Long enough that the Job still runs when the next operator takes over.
    ground.cluster.kubelet.script(KANIKO_IMAGE, { lines: 10, runMs: 8_000 });
    const link = await ground.proxyTo(ground.cluster.url);
    const first = await startOperator({ apiServer: link });
    const id = await created('kaniko');
    // Inside the double's store write of the Job: the first operator never hears of it.
    const unsubscribe = ground.cluster.store.subscribe((event: StoredEvent) => {
      if (
        event.resource === 'batch/jobs' &&
        event.type === 'ADDED' &&
        event.object.metadata.name === `kiln-${id}`
      )
        link.cut();
    });
    ground.onReset(() => Promise.resolve(void unsubscribe()));
    await start(id);
    const job = await until('the Job', () => ground.jobOf(id));
    await ground.stopOperator(first);
    // The premise: the Secret and the ConfigMap were made before the Job, and nothing owns them.
    expect(childrenOf(id)).toEqual([
      { kind: 'Secret', name: `kiln-${id}`, owners: [] },
      { kind: 'ConfigMap', name: `kiln-${id}`, owners: [] },
    ]);
    expect(ground.podOf(id)?.status?.phase).not.toBe('Succeeded');

    await startOperator();
    const owned = [`Job/kiln-${id} (controller)`];
    await until(
      'the next operator to make the Job the controller of both',
      () => {
        const children = childrenOf(id);
        return (
          children.length === 2 &&
          children.every((child) => child.owners.join() === owned.join()) &&
          ground.jobOf(id)?.metadata?.uid === job.metadata?.uid
        );
      },
      30_000,
    );
    expect(ground.jobsCreated(id)).toBe(0);
    expect((await ground.ended(id)).status).toBe('success');
    await jobRemoved(id);

    expect(childrenOf(id)).toEqual([]);
  }, 60_000);
});
