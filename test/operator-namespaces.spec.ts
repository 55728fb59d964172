import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { BUILDKIT_NO_USER_NAMESPACE } from '../src/build-methods/buildx.js';
import { wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { kubectlWith } from './support/kube/kubectl.js';
import { BUILDS, NS, OperatorGround, until } from './support/operator-ground.js';

/*
 * Builds isolated by Pod Security level (docs/adr/0040-namespaces-by-pod-security-level.md), end
 * to end on the API server double: an API (KILN_ROLE=api) and an operator (KILN_ROLE=operator)
 * configured with a namespace per level write and run each method's Build, Job and pod in its
 * level's namespace; a Build applied with kubectl where its pods would be refused ends InvalidSpec
 * with no Job; with user namespaces on, the pods that can run in one do.
 */

const RESTRICTED = 'kiln-builds-restricted';
const PRIVILEGED = 'kiln-builds-privileged';
/** The chart's shape with buildx on: kaniko and container stay in the old build namespace. */
const BY_LEVEL = {
  KILN_BUILD_NAMESPACE_RESTRICTED: RESTRICTED,
  KILN_BUILD_NAMESPACE_BASELINE: NS,
  KILN_BUILD_NAMESPACE_PRIVILEGED: PRIVILEGED,
};
const NAMESPACES = [RESTRICTED, NS, PRIVILEGED];

type Obj = Record<string, any>;

/** A packer template with a cloud builder (the wizard's `docker` builder is refused on Kubernetes). */
function packerManifest(): Record<string, unknown> {
  const manifest = wizardManifest('packer');
  (manifest['build_config'] as Obj)['packer_template'] = JSON.stringify({
    builders: [{ type: 'amazon-ebs', ami_name: 'kiln-{{timestamp}}' }],
  });
  return manifest;
}

/** A paketo build pushing to a registry (the lifecycle exports its image to one). */
function paketoManifest(): Record<string, unknown> {
  const manifest = wizardManifest('paketo');
  (manifest['build_config'] as Obj)['registry_repository'] = 'registry.example.com/team/app';
  return manifest;
}

function seedNamespaces(ground: OperatorGround, names: string[]): void {
  for (const name of names)
    ground.cluster.seed({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
}

/** Where the build's Build, Job and pod are, namespace by namespace. */
function placed(ground: OperatorGround, id: string): Record<string, string[]> {
  return Object.fromEntries(
    NAMESPACES.map((namespace) => [
      namespace,
      [
        ...ground.cluster.objects(...BUILDS, namespace).filter((b) => b.metadata.name === id),
        ...ground.cluster
          .objects('batch/v1', 'jobs', namespace)
          .filter((j) => j.metadata.name === `kiln-${id}`),
        ...ground.cluster
          .objects('v1', 'pods', namespace)
          .filter((p) => p.metadata.labels?.['job-name'] === `kiln-${id}`),
      ].map((o) => o.kind),
    ]),
  );
}

function jobIn(ground: OperatorGround, namespace: string, id: string): V1Job | undefined {
  return (ground.cluster.objects('batch/v1', 'jobs', namespace) as V1Job[]).find(
    (j) => j.metadata?.name === `kiln-${id}`,
  );
}

/** `kubectl apply` of a Build of tenant A's project into `namespace`, as a user would. */
async function apply(
  ground: OperatorGround,
  namespace: string,
  name: string,
  spec: Obj,
): Promise<void> {
  const path = join(ground.dir, `${name}.yaml`);
  writeFileSync(
    path,
    stringify({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: { name, namespace },
      spec: {
        tenantId: ground.seeded.tenantA,
        projectId: ground.seeded.projectA,
        output: { image: 'registry.example.com/team/app', tags: [name] },
        ...spec,
      },
    }),
  );
  const kubeconfig = writeKubeconfig(
    join(ground.dir, 'kubeconfig-kubectl'),
    ground.cluster.url,
    NS,
  );
  expect(await kubectlWith(kubeconfig, ground.dir, 'apply', '-f', path)).toMatchObject({
    code: 0,
    stderr: '',
  });
}

/** The applied Build's status once it ended. */
async function endedStatus(ground: OperatorGround, namespace: string, name: string): Promise<Obj> {
  return until(`the Build ${namespace}/${name} to end`, () => {
    const build = ground.cluster.object('kiln.dev/v1alpha1', 'builds', namespace, name) as
      Obj | undefined;
    const state = build?.status?.state as string | undefined;
    return state === 'success' || state === 'failed' ? (build!.status as Obj) : undefined;
  });
}

describe('builds in namespaces by Pod Security level', () => {
  let ground: OperatorGround;

  beforeAll(async () => {
    ground = await OperatorGround.start('operator-namespaces', { apiEnv: BY_LEVEL });
    seedNamespaces(ground, [RESTRICTED, PRIVILEGED]);
    await ground.startOperator({ env: { ...BY_LEVEL, KILN_BUILD_USER_NAMESPACES: 'true' } });
  });

  afterAll(() => ground.close());

  it.each<[string, () => Record<string, unknown>, string]>([
    ['kaniko', () => wizardManifest('kaniko'), NS],
    ['container', () => wizardManifest('container'), NS],
    ['paketo', paketoManifest, RESTRICTED],
    ['packer', packerManifest, RESTRICTED],
    ['buildx', () => wizardManifest('buildx'), PRIVILEGED],
  ])(
    'runs a %s build in its level’s namespace: its Build, Job and pod there and nowhere else',
    async (_method, manifest, namespace) => {
      const id = await ground.startedWizard(manifest());

      const ended = await ground.ended(id, 30_000);
      expect({ status: ended.status, error: ended.error_message }).toEqual({
        status: 'success',
        error: null,
      });
      await until(
        'the Job’s TTL',
        () => jobIn(ground, namespace, id)?.spec?.ttlSecondsAfterFinished,
      );
      expect(placed(ground, id)).toEqual(
        Object.fromEntries(
          NAMESPACES.map((ns) => [ns, ns === namespace ? ['Build', 'Job', 'Pod'] : []]),
        ),
      );
      // Owned by its Build, in its Build's namespace (owner references cannot cross namespaces).
      expect(jobIn(ground, namespace, id)?.metadata?.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Build', name: id, controller: true }),
      ]);
    },
    45_000,
  );

  it('runs the pods of every method but buildx in a user namespace, and says why not for buildx', async () => {
    const kaniko = await ground.startedWizard({ ...wizardManifest('kaniko'), tags: 'userns' });
    const buildx = await ground.startedWizard({ ...wizardManifest('buildx'), tags: 'userns' });
    for (const id of [kaniko, buildx]) await ground.ended(id, 30_000);

    const podSpec = (namespace: string, id: string) =>
      jobIn(ground, namespace, id)?.spec?.template.spec as Obj | undefined;
    expect(podSpec(NS, kaniko)?.hostUsers).toBe(false);
    expect(podSpec(PRIVILEGED, buildx)).not.toHaveProperty('hostUsers');
    // The pods the kubelet ran carry it too (the Job controller copied the template).
    const pod = (ground.cluster.objects('v1', 'pods', NS) as V1Pod[]).find(
      (p) => p.metadata?.labels?.['job-name'] === `kiln-${kaniko}`,
    );
    expect(pod?.spec?.hostUsers).toBe(false);
    const notes = (await ground.storedLines(buildx)).map((l) => l.message);
    expect(notes).toContainEqual(expect.stringContaining(BUILDKIT_NO_USER_NAMESPACE));
  }, 60_000);

  it('ends a Build applied into a namespace whose level would refuse its pods with InvalidSpec naming where it belongs, and makes no Job', async () => {
    const name = 'kaniko-in-restricted';
    await apply(ground, RESTRICTED, name, {
      method: 'kaniko',
      config: { dockerfile: 'FROM scratch\n' },
    });

    const status = await endedStatus(ground, RESTRICTED, name);

    expect(status).toMatchObject({
      state: 'failed',
      failureReason: 'InvalidSpec',
      conditions: [
        expect.objectContaining({ type: 'Succeeded', status: 'False', reason: 'InvalidSpec' }),
      ],
    });
    expect(status.message).toBe(
      `kaniko builds need Pod Security "baseline" pods and belong in namespace ${NS}; namespace ${RESTRICTED} admits Pod Security "restricted" pods at most`,
    );
    const id = status.buildId as string;
    expect(placed(ground, id)).toEqual(Object.fromEntries(NAMESPACES.map((ns) => [ns, []])));
    // Registered with a number, and failed where the API shows it.
    const build = await ground.failedWith(id, 'InvalidSpec');
    expect(build.build_number).toEqual(expect.any(Number));
  }, 30_000);

  it('runs a Build applied into a more permissive namespace than its method needs', async () => {
    const name = 'packer-in-baseline';
    await apply(ground, NS, name, {
      method: 'packer',
      config: {
        packer_template: JSON.stringify({ builders: [{ type: 'amazon-ebs', ami_name: 'x' }] }),
      },
    });

    const status = await endedStatus(ground, NS, name);

    expect(status).toMatchObject({ state: 'success' });
    expect(placed(ground, status.buildId as string)[NS]).toEqual(['Job', 'Pod']);
  }, 30_000);

  it('starts a queued build whose Build an earlier kiln wrote into another build namespace there, writing no second one', async () => {
    // Created while every level was one namespace (NS), started after restricted got its own.
    const created = await ground.admin.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantA,
      project_id: ground.seeded.projectA,
      manifest: { ...paketoManifest(), tags: 'before-the-move' },
    });
    const id = (await jsonOf(created)).data.id as string;
    const written = ground.cluster.object('kiln.dev/v1alpha1', 'builds', RESTRICTED, id)!;
    ground.cluster.seed({
      ...structuredClone(written),
      metadata: { ...written.metadata, namespace: NS },
    });
    const path = `/apis/kiln.dev/v1alpha1/namespaces/${RESTRICTED}/builds/${id}`;
    expect((await fetch(`${ground.cluster.url}${path}`, { method: 'DELETE' })).status).toBe(200);
    await until('the Build to leave the restricted namespace', () =>
      placed(ground, id)[RESTRICTED]!.length === 0 ? true : undefined,
    );

    expect((await ground.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);

    expect((await ground.ended(id, 30_000)).status).toBe('success');
    expect(placed(ground, id)).toEqual({
      [RESTRICTED]: [],
      [NS]: ['Build', 'Job', 'Pod'],
      [PRIVILEGED]: [],
    });
  }, 45_000);

  it('cancels and deletes a build through the API in its own namespace', async () => {
    ground.cluster.kubelet.script('paketobuildpacks/builder-jammy-base', { lines: 1, hang: true });
    const id = await ground.startedWizard({ ...paketoManifest(), tags: 'cancelled' });
    await until('its pod', () => placed(ground, id)[RESTRICTED]!.includes('Pod') || undefined);

    const cancelled = await ground.admin.request('POST', `/builds/${id}/cancel`, {
      reason: 'enough',
    });

    expect(cancelled.status).toBe(200);
    expect((await ground.ended(id, 30_000)).status).toBe('cancelled');
    await until('the Job to go', () =>
      jobIn(ground, RESTRICTED, id) === undefined ? true : undefined,
    );
    expect((await ground.admin.request('DELETE', `/builds/${id}`)).status).toBe(204);
    await until('the Build to go', () =>
      placed(ground, id)[RESTRICTED]!.includes('Build') ? undefined : true,
    );
  }, 45_000);
});

describe('builds in namespaces by Pod Security level, privileged pods not allowed', () => {
  let ground: OperatorGround;
  const NO_PRIVILEGED = {
    KILN_BUILD_NAMESPACE_RESTRICTED: RESTRICTED,
    KILN_BUILD_NAMESPACE_BASELINE: NS,
    KILN_BUILD_ALLOW_PRIVILEGED: 'false',
  };

  beforeAll(async () => {
    ground = await OperatorGround.start('operator-no-privileged', { apiEnv: NO_PRIVILEGED });
    seedNamespaces(ground, [RESTRICTED]);
    await ground.startOperator({ env: NO_PRIVILEGED });
  });

  afterAll(() => ground.close());

  it('refuses a buildx build at create, recording nothing and writing no Build', async () => {
    const created = await ground.admin.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantA,
      project_id: ground.seeded.projectA,
      manifest: wizardManifest('buildx'),
    });

    expect(created.status).toBe(400);
    expect((await jsonOf(created)).error).toMatch(
      /buildx builds cannot run on this kiln: their pods need Pod Security "privileged"/,
    );
    expect((await jsonOf(await ground.admin.request('GET', '/builds?limit=100'))).builds).toEqual(
      [],
    );
    for (const namespace of [RESTRICTED, NS])
      expect(ground.cluster.objects(...BUILDS, namespace)).toEqual([]);
  });

  it('ends a buildx Build applied with kubectl with InvalidSpec saying how buildx is enabled', async () => {
    const name = 'buildx-without-privileged';
    await apply(ground, NS, name, {
      method: 'buildx',
      config: { dockerfile: 'FROM scratch\n' },
    });

    const status = await endedStatus(ground, NS, name);

    expect(status).toMatchObject({ state: 'failed', failureReason: 'InvalidSpec' });
    expect(status.message).toMatch(
      /no build namespace of this kiln admits .*builds\.buildx\.enabled/,
    );
    expect(jobIn(ground, NS, status.buildId as string)).toBeUndefined();
  }, 30_000);
});
