import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { join } from 'node:path';
import { BUILDKIT_IMAGE, KANIKO_IMAGE } from '../src/build-methods/images.js';
import { paketoBuilderImage } from '../src/build-methods/paketo.js';
import { wizardManifest } from './support/builds.js';
import { renderChart } from './support/helm/render.js';
import type { RecordedRequest } from './support/kube/api-server.js';
import type { ContainerScript } from './support/kube/kubelet.js';
import { NS, OperatorGround, until } from './support/operator-ground.js';

/**
 * The chart's RBAC is enough, and no more than enough (issue 13), in every build namespace (issue
 * 29: one per Pod Security level): the API (KILN_ROLE=api) and an operator (KILN_ROLE=operator),
 * each configured with the build namespaces the chart gives it, run builds of a method of each
 * level against the API server double, and every request each sent (told apart by kiln's
 * User-Agent) must be allowed by the Roles the chart renders for its ServiceAccount, in that
 * request's namespace; every rule the chart grants, in each namespace, must have been used by
 * some request there.
 */
const RELEASE_NAMESPACE = 'default';
const RESTRICTED = 'kiln-builds-restricted';
const PRIVILEGED = 'kiln-builds-privileged';
/** The repository of an image: the double's kubelet scripts every tag and digest of it. */
const repositoryOf = (image: string) => image.replace(/@.*$/, '').replace(/:[^/:]*$/, '');

/** A build of one method, the namespace its level puts it in, and its builder's image. */
interface Level {
  readonly method: 'kaniko' | 'paketo' | 'buildx';
  readonly namespace: string;
  readonly image: string;
}
const LEVELS: readonly Level[] = [
  { method: 'paketo', namespace: RESTRICTED, image: 'paketobuildpacks/builder:base' },
  { method: 'kaniko', namespace: NS, image: KANIKO_IMAGE },
  { method: 'buildx', namespace: PRIVILEGED, image: BUILDKIT_IMAGE },
];

type Obj = Record<string, any>;

interface Attributes {
  readonly namespace: string;
  readonly apiGroup: string;
  /** `resource` or `resource/subresource`. */
  readonly resource: string;
  readonly name: string | undefined;
  readonly verb: string;
}

/** The RBAC attributes of a request, as the API server's authorizer derives them. */
function attributesOf(request: RecordedRequest): Attributes | 'non-resource' {
  const path = request.path.split('?')[0]!;
  const match =
    /^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+)(?:\/([^/]+))?)?$/.exec(
      path,
    );
  if (match === null) {
    if (
      /^\/(version|api|apis|openapi(\/.*)?)\/?$/.test(path) ||
      (path.startsWith('/apis/') && path.split('/').length <= 4)
    )
      return 'non-resource';
    throw new Error(`${request.method} ${path}: not a namespaced resource request`);
  }
  const [, group = '', namespace, resource, name, subresource] = match;
  const verbs: Record<string, string> = {
    POST: 'create',
    PUT: 'update',
    PATCH: 'patch',
    DELETE: name === undefined ? 'deletecollection' : 'delete',
    GET: name === undefined ? (request.query['watch'] === 'true' ? 'watch' : 'list') : 'get',
  };
  return {
    namespace: namespace!,
    apiGroup: group,
    resource: subresource === undefined ? resource! : `${resource}/${subresource}`,
    name,
    verb: verbs[request.method]!,
  };
}

interface Rule {
  readonly namespace: string;
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly verbs: string[];
  readonly resourceNames?: string[];
}

const allows = (rule: Rule, a: Attributes): boolean =>
  rule.namespace === a.namespace &&
  rule.apiGroups.includes(a.apiGroup) &&
  rule.resources.includes(a.resource) &&
  rule.verbs.includes(a.verb) &&
  (rule.resourceNames === undefined ||
    (a.name !== undefined && rule.resourceNames.includes(a.name)));

describe("the chart's RBAC against what kiln calls", () => {
  let ground: OperatorGround;
  let rules: Record<'kiln-api' | 'kiln-operator', Rule[]>;
  /** The build namespaces as the chart tells the operator (and the API) of them. */
  let buildEnv: Record<string, string>;
  let builds = 0;

  beforeAll(async () => {
    const chart = renderChart({
      chartDir: join(__dirname, '..', 'charts', 'kiln'),
      releaseName: 'kiln',
      namespace: RELEASE_NAMESPACE,
      values: {
        database: { existingSecret: 'db' },
        builds: {
          namespaces: {
            restricted: { name: RESTRICTED },
            baseline: { name: NS },
            privileged: { name: PRIVILEGED },
          },
          buildx: { enabled: true },
        },
      },
    });
    const objects = chart.documents.map((d) => d.object as Obj);
    const envOf = (deployment: string): Record<string, string> =>
      Object.fromEntries(
        (
          objects.find((o) => o.kind === 'Deployment' && o.metadata.name === deployment)!.spec
            .template.spec.containers[0].env as Obj[]
        )
          .filter((e) => /^KILN_BUILD_(NAMESPACE|ALLOW_PRIVILEGED)/.test(e.name as string))
          .map((e) => [e.name as string, e.value as string]),
      );
    buildEnv = envOf('kiln-operator');
    expect(envOf('kiln-api')).toEqual(buildEnv);
    const rulesOf = (account: string): Rule[] =>
      objects
        .filter(
          (o) =>
            o.kind === 'RoleBinding' &&
            (o.subjects as Obj[]).some((s) => s.kind === 'ServiceAccount' && s.name === account),
        )
        .flatMap((binding) => {
          // A RoleBinding grants the Role of its own namespace.
          const role = objects.find(
            (o) =>
              o.kind === 'Role' &&
              o.metadata.name === binding.roleRef.name &&
              o.metadata.namespace === binding.metadata.namespace,
          )!;
          return (role.rules as Obj[]).map(
            (r) => ({ ...r, namespace: role.metadata.namespace }) as Rule,
          );
        });
    rules = { 'kiln-api': rulesOf('kiln-api'), 'kiln-operator': rulesOf('kiln-operator') };
    ground = await OperatorGround.start('chart-rbac', { apiEnv: buildEnv });
    for (const name of [RESTRICTED, PRIVILEGED])
      ground.cluster.seed({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  });

  afterAll(() => ground.close());

  const jobOf = (namespace: string, id: string) =>
    (ground.cluster.objects('batch/v1', 'jobs', namespace) as V1Job[]).find(
      (j) => j.metadata?.name === `kiln-${id}`,
    );
  const podOf = (namespace: string, id: string) =>
    (ground.cluster.objects('v1', 'pods', namespace) as V1Pod[]).find(
      (p) => p.metadata?.labels?.['job-name'] === `kiln-${id}`,
    );
  const script = ({ method, image }: Level, run: ContainerScript) =>
    ground.cluster.kubelet.script(
      repositoryOf(method === 'paketo' ? paketoBuilderImage(image).image : image),
      run,
    );

  /** A wizard build of `level`'s method, with a tag of its own, created and started. */
  async function started({ method }: Level): Promise<string> {
    const manifest = wizardManifest(method);
    manifest['tags'] = `latest, rbac-${(builds += 1)}`;
    // Pushed to a registry (the buildpacks lifecycle exports to one): the steps after the image
    // run, with their upload tokens in the build's Secret.
    (manifest['build_config'] as Obj)['registry_repository'] = 'registry.example.com/team/app';
    return ground.startedWizard(manifest);
  }

  it('allows every request the API and the operator send over a build, a cancel and a delete in each build namespace, and grants nothing unused', async () => {
    const since = ground.cluster.requests.length;
    await ground.startOperator({
      env: {
        ...buildEnv,
        // As the chart runs it: the Lease in the release namespace, under the chart's name.
        KILN_OPERATOR_LEASE_NAMESPACE: RELEASE_NAMESPACE,
        KILN_OPERATOR_LEASE_NAME: 'kiln-operator',
        // With the steps on, as the chart runs it with a pinned image: the build's Secret.
        KILN_STEP_IMAGE: `registry.example.com/kiln@sha256:${'0'.repeat(64)}`,
        KILN_UPLOAD_URL: ground.api.baseUrl,
      },
    });

    for (const level of LEVELS) {
      const { namespace } = level;
      // A wizard build (its Dockerfile in a ConfigMap) that succeeds and is deleted afterwards.
      script(level, { lines: 20, linesPerSecond: 200 });
      const done = await started(level);
      expect((await ground.ended(done, 30_000)).status).toBe('success');
      await until('the Job to get its TTL', () =>
        jobOf(namespace, done)?.spec?.ttlSecondsAfterFinished === undefined ? undefined : true,
      );
      expect((await ground.admin.request('DELETE', `/builds/${done}`)).status).toBe(204);

      // One cancelled while it runs.
      script(level, { lines: 1, hang: true });
      const cancelled = await started(level);
      // With the steps on, the builder is an init container: the pod is Pending while it runs.
      await until('the builder to run', () => {
        const status = podOf(namespace, cancelled)?.status;
        const statuses = [
          ...(status?.initContainerStatuses ?? []),
          ...(status?.containerStatuses ?? []),
        ];
        return statuses.some((c) => c.name === 'build' && c.state?.running !== undefined)
          ? true
          : undefined;
      });
      const cancel = await ground.admin.request('POST', `/builds/${cancelled}/cancel`, {
        reason: 'rbac test',
      });
      expect(cancel.status).toBe(200);
      expect((await ground.ended(cancelled, 30_000)).status).toBe('cancelled');
      await until('the Job to be deleted', () =>
        jobOf(namespace, cancelled) === undefined ? true : undefined,
      );
    }

    const requests = ground.cluster.requests.slice(since);
    const used = new Set<Rule>();
    const refused: string[] = [];
    for (const request of requests) {
      const account = request.userAgent;
      if (account !== 'kiln-api' && account !== 'kiln-operator') continue;
      const attributes = attributesOf(request);
      if (attributes === 'non-resource') continue;
      const allowing = rules[account].filter((rule) => allows(rule, attributes));
      if (allowing.length === 0)
        refused.push(
          `${account}: ${attributes.verb} ${attributes.apiGroup}/${attributes.resource} in ${attributes.namespace}`,
        );
      for (const rule of allowing) used.add(rule);
    }
    expect([...new Set(refused)]).toEqual([]);
    // Both parts were seen (the User-Agent is what tells them apart).
    const agents = new Set(requests.map((r) => r.userAgent));
    expect([...agents]).toEqual(expect.arrayContaining(['kiln-api', 'kiln-operator']));

    // Every rule was needed by a request in its namespace, but the finalizers one: the API
    // server checks it on a Job whose ownerReference blocks its owner's deletion; it is never a
    // request of its own.
    const unused = Object.entries(rules).flatMap(([account, list]) =>
      list
        .filter((rule) => !used.has(rule))
        .flatMap((rule) =>
          rule.verbs
            .filter(
              (verb) =>
                !requests.some((r) => {
                  const a = r.userAgent === account ? attributesOf(r) : 'non-resource';
                  return a !== 'non-resource' && allows({ ...rule, verbs: [verb] }, a);
                }),
            )
            .map((verb) => `${account}: ${verb} ${rule.resources.join(',')} in ${rule.namespace}`),
        ),
    );
    expect(unused).toEqual(
      LEVELS.map(({ namespace }) => `kiln-operator: update builds/finalizers in ${namespace}`),
    );
  }, 240_000);
});
