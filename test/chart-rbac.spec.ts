import { join } from 'node:path';
import { renderChart } from './support/helm/render.js';
import type { RecordedRequest } from './support/kube/api-server.js';
import { NS, OperatorGround, until } from './support/operator-ground.js';

/**
 * The chart's RBAC is enough, and no more than enough (issue 13): the API (KILN_ROLE=api) and an
 * operator (KILN_ROLE=operator) run builds against the API server double, and every request each
 * sent (told apart by kiln's User-Agent) must be allowed by the Roles the chart renders for its
 * ServiceAccount; every rule the chart grants must have been used by some request.
 */
const RELEASE_NAMESPACE = 'default';

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

  beforeAll(async () => {
    ground = await OperatorGround.start('chart-rbac');
    const chart = renderChart({
      chartDir: join(__dirname, '..', 'charts', 'kiln'),
      releaseName: 'kiln',
      namespace: RELEASE_NAMESPACE,
      values: { database: { existingSecret: 'db' }, builds: { namespace: NS } },
    });
    const objects = chart.documents.map((d) => d.object as Obj);
    const rulesOf = (account: string): Rule[] =>
      objects
        .filter(
          (o) =>
            o.kind === 'RoleBinding' &&
            (o.subjects as Obj[]).some((s) => s.kind === 'ServiceAccount' && s.name === account),
        )
        .flatMap((binding) => {
          const role = objects.find(
            (o) => o.kind === 'Role' && o.metadata.name === binding.roleRef.name,
          )!;
          return (role.rules as Obj[]).map(
            (r) => ({ ...r, namespace: role.metadata.namespace }) as Rule,
          );
        });
    rules = { 'kiln-api': rulesOf('kiln-api'), 'kiln-operator': rulesOf('kiln-operator') };
  });

  afterAll(() => ground.close());

  it('allows every request the API and the operator send over a build, a cancel and a delete, and grants nothing unused', async () => {
    const since = ground.cluster.requests.length;
    await ground.startOperator({
      // As the chart runs it: the Lease in the release namespace, under the chart's name.
      env: {
        KILN_OPERATOR_LEASE_NAMESPACE: RELEASE_NAMESPACE,
        KILN_OPERATOR_LEASE_NAME: 'kiln-operator',
        // With the steps on, as the chart runs it with a pinned image: the build's Secret.
        KILN_STEP_IMAGE: `registry.example.com/kiln@sha256:${'0'.repeat(64)}`,
        KILN_UPLOAD_URL: ground.api.baseUrl,
      },
    });

    // A wizard build (its Dockerfile in a ConfigMap) that succeeds and is deleted afterwards.
    ground.builder({ lines: 20, linesPerSecond: 200 });
    const done = await ground.startedBuild();
    expect((await ground.ended(done, 30_000)).status).toBe('success');
    await until('the Job to get its TTL', () =>
      ground.jobOf(done)?.spec?.ttlSecondsAfterFinished === undefined ? undefined : true,
    );
    expect((await ground.admin.request('DELETE', `/builds/${done}`)).status).toBe(204);

    // One cancelled while it runs.
    ground.builder({ lines: 1, hang: true });
    const cancelled = await ground.startedBuild();
    // With the steps on, the builder is an init container: the pod is Pending while it runs.
    await until('the builder to run', () => {
      const status = ground.podOf(cancelled)?.status;
      const statuses = [
        ...(status?.initContainerStatuses ?? []),
        ...(status?.containerStatuses ?? []),
      ];
      return statuses.some((c) => c.name === 'build' && c.state?.running !== undefined)
        ? true
        : undefined;
    });
    expect(
      (await ground.admin.request('POST', `/builds/${cancelled}/cancel`, { reason: 'rbac test' }))
        .status,
    ).toBe(200);
    expect((await ground.ended(cancelled, 30_000)).status).toBe('cancelled');
    await until('the Job to be deleted', () =>
      ground.jobOf(cancelled) === undefined ? true : undefined,
    );

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

    // Every rule was needed by a request, but the finalizers one: the API server checks it on a
    // Job whose ownerReference blocks its owner's deletion; it is never a request of its own.
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
            .map((verb) => `${account}: ${verb} ${rule.resources.join(',')}`),
        ),
    );
    expect(unused).toEqual(['kiln-operator: update builds/finalizers']);
  }, 120_000);
});
