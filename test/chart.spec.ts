import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse, parseDocument } from 'yaml';
import { renderChart, type RenderedChart } from './support/helm/render.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { kubectlWith } from './support/kube/kubectl.js';
import { type PodSpec, restrictedViolations } from './support/pod-security.js';
import { loadConfig } from '../src/config/config.js';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const chartValues = require('../scripts/chart-values.cjs') as {
  valuesRows(): Array<{ key: string; default: string; description: string }>;
  readmeRows(readme: string): Array<{ key: string; default: string; description: string }>;
};

/**
 * charts/kiln (issue 13), rendered with Helm's own template engine (test/support/helm/), checked
 * against Kubernetes' schemas, the chart's values schema, the RBAC the ADR lists, Pod Security
 * `restricted`, and the real kubectl against the API server double.
 */
const ROOT = join(__dirname, '..');
const CHART = join(ROOT, 'charts', 'kiln');
const EXAMPLES = readdirSync(join(CHART, 'ci')).map((name) => join(CHART, 'ci', name));
const RELEASE = { releaseName: 'kiln', namespace: 'kiln' };
const DATABASE = { database: { existingSecret: 'kiln-database' } };

type Obj = Record<string, any>;

const render = (values: unknown = DATABASE, valuesFiles: string[] = []): RenderedChart =>
  renderChart({ chartDir: CHART, ...RELEASE, values, valuesFiles });
const objects = (chart: RenderedChart): Obj[] => chart.documents.map((d) => d.object as Obj);
const find = (chart: RenderedChart, kind: string, name?: string): Obj[] =>
  objects(chart).filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
const one = (chart: RenderedChart, kind: string, name: string): Obj => {
  const found = find(chart, kind, name);
  expect(found.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([`${kind}/${name}`]);
  return found[0]!;
};
const envOf = (deployment: Obj): Obj[] => deployment.spec.template.spec.containers[0].env;
const env = (deployment: Obj, name: string): Obj | undefined =>
  envOf(deployment).find((e) => e.name === name);

/** Validates objects with Kubernetes' own OpenAPI schemas (kubernetes-models, its own process). */
function schemaErrors(list: Obj[]): string[] {
  const out = execFileSync('node', [join(__dirname, 'support', 'kube', 'validate-objects.mjs')], {
    input: JSON.stringify(list),
    encoding: 'utf8',
    cwd: ROOT,
  });
  return (JSON.parse(out) as Array<{ kind: string; name: string; errors: string[] }>).flatMap((r) =>
    r.errors.map((e) => `${r.kind}/${r.name} ${e}`),
  );
}

/** Deep merge as Helm merges values files (maps merge, everything else replaces, null deletes). */
function merge(base: Obj, over: Obj): Obj {
  const out: Obj = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === null) delete out[key];
    else if (typeof value === 'object' && !Array.isArray(value) && typeof out[key] === 'object')
      out[key] = merge(out[key] as Obj, value as Obj);
    else out[key] = value;
  }
  return out;
}

describe('the Helm chart (charts/kiln)', () => {
  const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Obj;

  it('renders for values.yaml with a database and for every example values file, each object valid for its kind', () => {
    const charts = [render(), ...EXAMPLES.map((file) => render(undefined, [file]))];
    for (const chart of charts) {
      expect(chart.documents.length).toBeGreaterThan(10);
      for (const document of chart.documents) expect(document.object).toHaveProperty('kind');
      expect(schemaErrors(objects(chart))).toEqual([]);
    }
    // The schemas do catch a wrong object.
    const broken = structuredClone(one(charts[0]!, 'Deployment', 'kiln-api'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(schemaErrors([broken])).toEqual([
      expect.stringContaining('/spec/template/spec/containers/0/ports/0/containerPort'),
    ]);
  });

  it('stops with a message that names database.existingSecret when there is no database', () => {
    expect(() => render({})).toThrow(/database\.existingSecret is required/);
    const evaluation = render({ postgresql: { enabled: true } });
    expect(one(evaluation, 'StatefulSet', 'kiln-postgresql').metadata.labels).toMatchObject({
      'kiln.dev/evaluation-only': 'true',
    });
    expect(evaluation.notes).toMatch(/evaluation only/i);
    expect(env(one(evaluation, 'Deployment', 'kiln-api'), 'DATABASE_URL')).toEqual({
      name: 'DATABASE_URL',
      valueFrom: { secretKeyRef: { name: 'kiln-postgresql', key: 'url' } },
    });
  });

  describe('values.schema.json', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(
      JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as object,
    );
    const problems = (values: Obj): string[] =>
      validate(values) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);

    it('accepts values.yaml and every example values file merged over it', () => {
      expect(problems(defaults)).toEqual([]);
      for (const file of EXAMPLES)
        expect(problems(merge(defaults, parse(readFileSync(file, 'utf8')) as Obj))).toEqual([]);
    });

    it.each([
      ['an unknown top-level key', { replicas: 3 }, ''],
      ['an unknown nested key', { api: { replica: 3 } }, '/api'],
      ['a replica count as text', { api: { replicas: '2' } }, '/api/replicas'],
      [
        'a Pod Security level chosen for a namespace (each level has its own)',
        { builds: { podSecurityLevel: 'privileged' } },
        '/builds',
      ],
      [
        'a build namespace for a level that does not exist',
        { builds: { namespaces: { open: { name: 'kiln-open', create: true } } } },
        '/builds/namespaces',
      ],
      ['a digest that is not sha256', { image: { digest: 'latest' } }, '/image/digest'],
      [
        'a namespace that is not a DNS label',
        { builds: { namespaces: { baseline: { name: 'Kiln_Builds' } } } },
        '/builds/namespaces/baseline/name',
      ],
      [
        'buildx switched on with text',
        { builds: { buildx: { enabled: 'yes' } } },
        '/builds/buildx/enabled',
      ],
      ['user namespaces as text', { builds: { userNamespaces: 'true' } }, '/builds/userNamespaces'],
      [
        'a port out of range',
        { builds: { networkPolicy: { egressPorts: [70000] } } },
        '/builds/networkPolicy/egressPorts/0',
      ],
      [
        'a lowercase environment variable',
        { operator: { extraEnv: { debug: '1' } } },
        '/operator/extraEnv',
      ],
      [
        'node options that are not --flags',
        { operator: { nodeOptions: '--max-old-space-size=256; rm -rf /' } },
        '/operator/nodeOptions',
      ],
      [
        'a step tool image not pinned by digest',
        { builds: { steps: { toolImages: { snyk: 'snyk/snyk:linux' } } } },
        '/builds/steps/toolImages/snyk',
      ],
      [
        'a step tool kiln does not know',
        { builds: { steps: { toolImages: { anchore: 'a@sha256:' + 'a'.repeat(64) } } } },
        '/builds/steps/toolImages',
      ],
    ])('rejects %s', (_what, override, path) => {
      const found = problems(merge(defaults, override));
      expect(found.length).toBeGreaterThan(0);
      expect(found.some((p) => p.startsWith(`${path} `) || p.startsWith(`${path}/`))).toBe(true);
    });
  });

  it("gives the operator each step tool's image it is set, as KILN_STEP_IMAGE_<TOOL>", () => {
    const snyk = `docker.io/snyk/snyk:linux@sha256:${'c'.repeat(64)}`;
    const grype = `anchore/grype:v0.99.0-debug@sha256:${'d'.repeat(64)}`;
    const operator = one(
      render({ ...DATABASE, builds: { steps: { toolImages: { snyk, grype } } } }),
      'Deployment',
      'kiln-operator',
    );

    expect(env(operator, 'KILN_STEP_IMAGE_SNYK')).toEqual({
      name: 'KILN_STEP_IMAGE_SNYK',
      value: snyk,
    });
    expect(env(operator, 'KILN_STEP_IMAGE_GRYPE')).toEqual({
      name: 'KILN_STEP_IMAGE_GRYPE',
      value: grype,
    });
    const byDefault = one(render(), 'Deployment', 'kiln-operator');
    expect(envOf(byDefault).filter((e) => /^KILN_STEP_IMAGE_/.test(e.name))).toEqual([]);
  });

  it('caps the V8 heap of the API and the operator with NODE_OPTIONS from nodeOptions; none when it is empty', () => {
    const chart = render();
    expect(env(one(chart, 'Deployment', 'kiln-operator'), 'NODE_OPTIONS')).toEqual({
      name: 'NODE_OPTIONS',
      value: defaults.operator.nodeOptions,
    });
    expect(env(one(chart, 'Deployment', 'kiln-api'), 'NODE_OPTIONS')).toEqual({
      name: 'NODE_OPTIONS',
      value: defaults.api.nodeOptions,
    });
    expect(defaults.operator.nodeOptions).toMatch(/--max-old-space-size=\d+/);

    const none = render({ ...DATABASE, api: { nodeOptions: '' }, operator: { nodeOptions: '' } });
    expect(env(one(none, 'Deployment', 'kiln-operator'), 'NODE_OPTIONS')).toBeUndefined();
    expect(env(one(none, 'Deployment', 'kiln-api'), 'NODE_OPTIONS')).toBeUndefined();
  });

  it('grants exactly the RBAC rules the ADR lists, in Roles only: the same two in each build namespace', () => {
    const chart = render();
    expect(find(chart, 'ClusterRole')).toEqual([]);
    expect(find(chart, 'ClusterRoleBinding')).toEqual([]);
    const rulesOf = (role: Obj) =>
      (role.rules as Obj[]).map((r) => ({
        apiGroups: r.apiGroups,
        resources: r.resources,
        verbs: r.verbs,
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
      }));
    const roles = (name: string): Record<string, unknown> =>
      Object.fromEntries(
        find(chart, 'Role', name).map((role) => [role.metadata.namespace, rulesOf(role)]),
      );
    const api = [
      { apiGroups: ['kiln.dev'], resources: ['builds'], verbs: ['create', 'patch', 'delete'] },
    ];
    const operator = [
      {
        apiGroups: ['kiln.dev'],
        resources: ['builds'],
        verbs: ['list', 'watch', 'patch', 'delete'],
      },
      { apiGroups: ['kiln.dev'], resources: ['builds/status'], verbs: ['patch'] },
      { apiGroups: ['kiln.dev'], resources: ['builds/finalizers'], verbs: ['update'] },
      {
        apiGroups: ['batch'],
        resources: ['jobs'],
        verbs: ['list', 'watch', 'create', 'patch', 'delete'],
      },
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'patch'] },
      // A build's own Secret: written, read back only to mask an adopted build's log.
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'patch', 'get'] },
      // Events of its Builds; the Job controller's Events of its Jobs (why a pod is not made).
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'list', 'watch'] },
    ];
    // buildx off: the restricted and baseline namespaces, not the privileged one.
    const buildNamespaces = ['kiln-builds-restricted', 'kiln-builds'];
    expect(roles('kiln-api')).toEqual(Object.fromEntries(buildNamespaces.map((n) => [n, api])));
    expect(roles('kiln-operator')).toEqual(
      Object.fromEntries(buildNamespaces.map((n) => [n, operator])),
    );
    expect(roles('kiln-operator-lease')).toEqual({
      kiln: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['get', 'update'],
          resourceNames: ['kiln-operator'],
        },
      ],
    });
    // No Role anywhere else: the build namespaces and the Lease's are all.
    expect(
      [...new Set(find(chart, 'Role').map((role) => role.metadata.namespace as string))].sort(),
    ).toEqual([...buildNamespaces, 'kiln'].sort());
    // Each Role is bound, in its own namespace, to its own account.
    for (const role of find(chart, 'Role')) {
      const name = role.metadata.name as string;
      const bindings = find(chart, 'RoleBinding', name).filter(
        (b) => b.metadata.namespace === role.metadata.namespace,
      );
      expect(bindings.map((b) => ({ roleRef: b.roleRef, subjects: b.subjects }))).toEqual([
        {
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
          subjects: [
            {
              kind: 'ServiceAccount',
              name: name.startsWith('kiln-api') ? 'kiln-api' : 'kiln-operator',
              namespace: 'kiln',
            },
          ],
        },
      ]);
    }
    expect(find(chart, 'RoleBinding')).toHaveLength(find(chart, 'Role').length);
    // With buildx on, the privileged namespace gets the same two Roles.
    const withBuildx = render({ ...DATABASE, builds: { buildx: { enabled: true } } });
    expect(
      find(withBuildx, 'Role')
        .filter((role) => role.metadata.namespace === 'kiln-builds-privileged')
        .map((role) => [role.metadata.name, rulesOf(role)]),
    ).toEqual([
      ['kiln-api', api],
      ['kiln-operator', operator],
    ]);
    const deployment = one(chart, 'Deployment', 'kiln-operator');
    expect(env(deployment, 'KILN_OPERATOR_LEASE_NAME')?.value).toBe('kiln-operator');
    expect(env(deployment, 'KILN_OPERATOR_LEASE_NAMESPACE')?.value).toBe('kiln');
  });

  it("runs kiln's own pods under Pod Security restricted, read-only, with tokens only where needed", () => {
    const chart = render({ ...DATABASE, postgresql: { enabled: true } });
    const pods: Array<[string, PodSpec & Obj]> = [
      ...find(chart, 'Deployment').map((d): [string, PodSpec & Obj] => [
        d.metadata.name,
        d.spec.template.spec,
      ]),
      ...find(chart, 'StatefulSet').map((s): [string, PodSpec & Obj] => [
        s.metadata.name,
        s.spec.template.spec,
      ]),
      ...find(chart, 'Pod').map((p): [string, PodSpec & Obj] => [p.metadata.name, p.spec]),
    ];
    expect(pods.map(([name]) => name).sort()).toEqual([
      'kiln-api',
      'kiln-operator',
      'kiln-postgresql',
      'kiln-test-readyz',
    ]);
    for (const [name, spec] of pods) {
      expect({ name, violations: restrictedViolations(spec) }).toEqual({ name, violations: [] });
      const token = name === 'kiln-api' || name === 'kiln-operator';
      expect({ name, token: spec.automountServiceAccountToken }).toEqual({ name, token });
    }
    for (const account of find(chart, 'ServiceAccount'))
      expect(account.automountServiceAccountToken).toBe(false);
    for (const name of ['kiln-api', 'kiln-operator']) {
      const spec = one(chart, 'Deployment', name).spec.template.spec as Obj;
      const container = spec.containers[0] as Obj;
      expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
      expect(spec.securityContext.runAsUser).toBe(65532);
      // The writable places are exactly KILN_DATA_DIR and /tmp, both emptyDirs.
      const dataDir = (container.env as Obj[]).find((e) => e.name === 'KILN_DATA_DIR')?.value;
      expect((container.volumeMounts as Obj[]).map((m) => m.mountPath).sort()).toEqual(
        [dataDir, '/tmp'].sort(),
      );
      expect((spec.volumes as Obj[]).every((v) => 'emptyDir' in v)).toBe(true);
      expect(container.livenessProbe.httpGet.path).toBe('/healthz');
      expect(container.readinessProbe.httpGet.path).toBe('/readyz');
      expect(env(one(chart, 'Deployment', name), 'KILN_ROLE')?.value).toBe(
        name.slice('kiln-'.length),
      );
    }
    // The restricted checks do fail a root container.
    const kaniko: PodSpec = { containers: [{ name: 'kaniko', securityContext: { runAsUser: 0 } }] };
    expect(restrictedViolations(kaniko)).toEqual(
      expect.arrayContaining(['container kaniko: runAsUser 0', 'container kaniko: seccomp']),
    );
  });

  it('gives each build namespace its Pod Security level, a default-deny NetworkPolicy without the metadata address, a quota and limits', () => {
    const chart = render(merge(DATABASE, { builds: { buildx: { enabled: true } } }));
    const namespaces = ['kiln-builds-restricted', 'kiln-builds', 'kiln-builds-privileged'];
    for (const namespace of namespaces) {
      const policy = find(chart, 'NetworkPolicy', 'kiln-builds-default-deny').find(
        (p) => p.metadata.namespace === namespace,
      )!;
      expect(policy.spec.podSelector).toEqual({});
      expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
      expect(policy.spec.ingress).toBeUndefined();
      const [dns, api, out] = policy.spec.egress as Obj[];
      expect(dns!.to).toEqual([
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
          podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        },
      ]);
      // The upload step reaches kiln's API pods, and nothing else of kiln's namespace.
      expect(api!.to).toEqual([
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kiln' } },
          podSelector: {
            matchLabels: {
              'app.kubernetes.io/name': 'kiln',
              'app.kubernetes.io/instance': 'kiln',
              'app.kubernetes.io/component': 'api',
            },
          },
        },
      ]);
      expect(api!.ports).toEqual([{ protocol: 'TCP', port: 8080 }]);
      for (const peer of out!.to as Obj[]) expect(peer.ipBlock.except).toContain('169.254.0.0/16');
      expect((out!.ports as Obj[]).map((p) => p.port)).toEqual([443, 22, 80, 5000]);
      const quota = find(chart, 'ResourceQuota', 'kiln-builds').find(
        (q) => q.metadata.namespace === namespace,
      )!;
      expect(quota.spec.hard).toHaveProperty(['count/jobs.batch']);
      expect(quota.spec.hard).toHaveProperty(['limits.ephemeral-storage']);
      const limits = find(chart, 'LimitRange', 'kiln-builds').find(
        (l) => l.metadata.namespace === namespace,
      )!.spec.limits[0] as Obj;
      expect(limits.max).toHaveProperty(['ephemeral-storage']);
    }
    for (const kind of ['NetworkPolicy', 'ResourceQuota', 'LimitRange'])
      expect(find(chart, kind).map((o) => o.metadata.namespace)).toEqual(namespaces);

    const elsewhere = render(undefined, [join(CHART, 'ci', 'ingress-values.yaml')]);
    expect(find(elsewhere, 'Namespace')).toEqual([]);
    expect(one(elsewhere, 'Role', 'kiln-operator').metadata.namespace).toBe('team-builds');
    expect(find(elsewhere, 'NetworkPolicy').map((p) => p.metadata.namespace)).toEqual([
      'team-builds',
    ]);
  });

  describe('build namespaces by Pod Security level, per example values file', () => {
    const LABELS = (level: string) => ({
      'pod-security.kubernetes.io/enforce': level,
      'pod-security.kubernetes.io/enforce-version': 'latest',
      'pod-security.kubernetes.io/audit': level,
      'pod-security.kubernetes.io/warn': level,
    });
    /** Each Namespace the chart creates, with its Pod Security labels. */
    const created = (chart: RenderedChart) =>
      Object.fromEntries(
        find(chart, 'Namespace').map((ns) => [
          ns.metadata.name,
          Object.fromEntries(
            Object.entries(ns.metadata.labels as Record<string, string>).filter(([key]) =>
              key.startsWith('pod-security.kubernetes.io/'),
            ),
          ),
        ]),
      );
    /** The namespaces the API and the operator are told, by level. */
    const told = (chart: RenderedChart) =>
      ['kiln-api', 'kiln-operator'].map((name) =>
        Object.fromEntries(
          envOf(one(chart, 'Deployment', name))
            .filter((e) => /^KILN_BUILD_(NAMESPACE|ALLOW_PRIVILEGED)/.test(e.name as string))
            .map((e) => [e.name, e.value]),
        ),
      );
    const file = (name: string) => [join(CHART, 'ci', name)];

    it.each<[string, () => RenderedChart, Record<string, unknown>, Record<string, string>]>([
      [
        'values.yaml (buildx off)',
        () => render(),
        { 'kiln-builds-restricted': LABELS('restricted'), 'kiln-builds': LABELS('baseline') },
        {
          KILN_BUILD_NAMESPACE_RESTRICTED: 'kiln-builds-restricted',
          KILN_BUILD_NAMESPACE_BASELINE: 'kiln-builds',
          KILN_BUILD_ALLOW_PRIVILEGED: 'false',
        },
      ],
      [
        'evaluation-values.yaml (buildx on)',
        () => render(undefined, file('evaluation-values.yaml')),
        {
          'kiln-builds-restricted': LABELS('restricted'),
          'kiln-builds': LABELS('baseline'),
          'kiln-builds-privileged': LABELS('privileged'),
        },
        {
          KILN_BUILD_NAMESPACE_RESTRICTED: 'kiln-builds-restricted',
          KILN_BUILD_NAMESPACE_BASELINE: 'kiln-builds',
          KILN_BUILD_NAMESPACE_PRIVILEGED: 'kiln-builds-privileged',
        },
      ],
      [
        'external-database-values.yaml',
        () => render(undefined, file('external-database-values.yaml')),
        { 'kiln-builds-restricted': LABELS('restricted'), 'kiln-builds': LABELS('baseline') },
        {
          KILN_BUILD_NAMESPACE_RESTRICTED: 'kiln-builds-restricted',
          KILN_BUILD_NAMESPACE_BASELINE: 'kiln-builds',
          KILN_BUILD_ALLOW_PRIVILEGED: 'false',
        },
      ],
      [
        'ingress-values.yaml (one namespace for every level, made elsewhere)',
        () => render(undefined, file('ingress-values.yaml')),
        {},
        {
          KILN_BUILD_NAMESPACE_RESTRICTED: 'team-builds',
          KILN_BUILD_NAMESPACE_BASELINE: 'team-builds',
          KILN_BUILD_ALLOW_PRIVILEGED: 'false',
        },
      ],
    ])(
      '%s: creates the namespaces of its levels, labelled, and tells both parts',
      (_name, rendered, namespaces, variables) => {
        const chart = rendered();
        expect(created(chart)).toEqual(namespaces);
        expect(told(chart)).toEqual([variables, variables]);
        // The old single-namespace values are gone.
        for (const deployment of find(chart, 'Deployment'))
          expect(env(deployment, 'KILN_BUILD_NAMESPACE')).toBeUndefined();
      },
    );

    it('renders the privileged namespace only when buildx is enabled', () => {
      const off = render();
      const on = render({ ...DATABASE, builds: { buildx: { enabled: true } } });
      const where = (chart: RenderedChart) =>
        objects(chart)
          .filter(
            (o) =>
              o.metadata?.name === 'kiln-builds-privileged' ||
              o.metadata?.namespace === 'kiln-builds-privileged',
          )
          .map((o) => o.kind as string)
          .sort();
      expect(where(off)).toEqual([]);
      expect(where(on)).toEqual(
        [
          'LimitRange',
          'Namespace',
          'NetworkPolicy',
          'ResourceQuota',
          'Role',
          'Role',
          'RoleBinding',
          'RoleBinding',
        ].sort(),
      );
      expect(off.notes).toMatch(/buildx builds are refused/);
      expect(on.notes).not.toMatch(/buildx builds are refused/);
    });

    it('makes one namespace of levels given one name, labelled with the most permissive of them', () => {
      const chart = render(
        merge(DATABASE, {
          builds: {
            namespaces: {
              restricted: { name: 'builds' },
              baseline: { name: 'builds' },
              privileged: { name: 'builds' },
            },
            buildx: { enabled: true },
          },
        }),
      );
      expect(created(chart)).toEqual({ builds: LABELS('privileged') });
      expect(find(chart, 'Role').map((r) => `${r.metadata.namespace}/${r.metadata.name}`)).toEqual([
        'builds/kiln-api',
        'builds/kiln-operator',
        'kiln/kiln-operator-lease',
      ]);
      const stricter = render(
        merge(DATABASE, { builds: { namespaces: { restricted: { name: 'kiln-builds' } } } }),
      );
      expect(created(stricter)).toEqual({ 'kiln-builds': LABELS('baseline') });
    });

    it('creates only the namespaces it is asked to, and grants its Roles in every one', () => {
      const chart = render(
        merge(DATABASE, { builds: { namespaces: { restricted: { create: false } } } }),
      );
      expect(Object.keys(created(chart))).toEqual(['kiln-builds']);
      expect(find(chart, 'Role', 'kiln-operator').map((r) => r.metadata.namespace)).toEqual([
        'kiln-builds-restricted',
        'kiln-builds',
      ]);
    });

    it('gives the operator KILN_BUILD_USER_NAMESPACES only when builds.userNamespaces', () => {
      const on = render(undefined, file('external-database-values.yaml'));
      expect(env(one(on, 'Deployment', 'kiln-operator'), 'KILN_BUILD_USER_NAMESPACES')).toEqual({
        name: 'KILN_BUILD_USER_NAMESPACES',
        value: 'true',
      });
      expect(env(one(on, 'Deployment', 'kiln-api'), 'KILN_BUILD_USER_NAMESPACES')).toBeUndefined();
      expect(
        env(one(render(), 'Deployment', 'kiln-operator'), 'KILN_BUILD_USER_NAMESPACES'),
      ).toBeUndefined();
    });
  });

  it('templates the CRD from a byte-equal copy of crds/, kept on uninstall when crds.keep', () => {
    const source = readFileSync(join(ROOT, 'crds', 'builds.kiln.dev.yaml'));
    expect(readFileSync(join(CHART, 'files', 'builds.kiln.dev.yaml')).equals(source)).toBe(true);
    // Rendered as written (comments and all), plus the one annotation.
    const keep = '  annotations:\n    helm.sh/resource-policy: keep\n';
    const document = render().documents.find((d) => d.object.kind === 'CustomResourceDefinition');
    expect(document?.text.replace(keep, '').trim()).toBe(source.toString('utf8').trim());
    const crd = one(render(), 'CustomResourceDefinition', 'builds.kiln.dev');
    const expected = parseDocument(source.toString('utf8'), { version: '1.1' }).toJSON() as Obj;
    expect(crd).toEqual({
      ...expected,
      metadata: { ...expected.metadata, annotations: { 'helm.sh/resource-policy': 'keep' } },
    });
    const notKept = one(
      render({ ...DATABASE, crds: { keep: false } }),
      'CustomResourceDefinition',
      'builds.kiln.dev',
    );
    expect(notKept.metadata.annotations).toBeUndefined();
    expect(
      find(render({ ...DATABASE, crds: { enabled: false } }), 'CustomResourceDefinition'),
    ).toEqual([]);
  });

  it('creates the JWT key once and keeps it, or uses the Secret it is given', () => {
    const chart = render();
    const secret = one(chart, 'Secret', 'kiln-jwt');
    expect(secret.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    expect(Buffer.from(secret.data['jwt-secret'] as string, 'base64').toString()).toMatch(
      /^[A-Za-z0-9]{64}$/,
    );
    const api = one(chart, 'Deployment', 'kiln-api');
    expect(env(api, 'KILN_JWT_SECRET')?.valueFrom).toEqual({
      secretKeyRef: { name: 'kiln-jwt', key: 'jwt-secret' },
    });
    // The operator signs nothing: it does not get the key.
    expect(env(one(chart, 'Deployment', 'kiln-operator'), 'KILN_JWT_SECRET')).toBeUndefined();
    // The key of sealed build secrets: created once and kept, the same for both roles.
    const sealing = one(chart, 'Secret', 'kiln-secrets-key');
    expect(sealing.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    expect(Buffer.from(sealing.data['secrets-key'] as string, 'base64').toString()).toMatch(
      /^[A-Za-z0-9]{64}$/,
    );
    for (const name of ['kiln-api', 'kiln-operator'])
      expect(env(one(chart, 'Deployment', name), 'KILN_SECRETS_KEY')?.valueFrom).toEqual({
        secretKeyRef: { name: 'kiln-secrets-key', key: 'secrets-key' },
      });

    const given = render(undefined, [join(CHART, 'ci', 'external-database-values.yaml')]);
    expect(find(given, 'Secret')).toEqual([]);
    const givenApi = one(given, 'Deployment', 'kiln-api');
    expect(env(givenApi, 'KILN_JWT_SECRET')?.valueFrom.secretKeyRef.name).toBe('kiln-jwt');
    expect(env(givenApi, 'KILN_BOOTSTRAP_ADMIN_PASSWORD')?.valueFrom).toEqual({
      secretKeyRef: { name: 'kiln-admin', key: 'password' },
    });
    expect(givenApi.spec.template.spec.containers[0].image).toBe(
      'registry.example.com/platform/kiln@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0',
    );
    // Nothing secret is written into a manifest as plain text.
    for (const deployment of find(given, 'Deployment'))
      for (const variable of envOf(deployment))
        if (/SECRET|PASSWORD|DATABASE_URL/.test(variable.name as string))
          expect(variable.value).toBeUndefined();
  });

  it('gives the API and the operator the same admission limits, which kiln accepts; a null limit is no variable', () => {
    const admissionEnv = (chart: RenderedChart) =>
      ['kiln-api', 'kiln-operator'].map((name) =>
        Object.fromEntries(
          envOf(one(chart, 'Deployment', name))
            .filter((e) =>
              /^KILN_(ADMISSION|KUEUE|MAX_RUNNING|TENANT_MAX|PROJECT_MAX|QUEUE_TTL|OPERATOR_UNSCHEDULABLE)/.test(
                e.name as string,
              ),
            )
            .map((e) => [e.name, e.value]),
        ),
      );
    const defaults = {
      KILN_ADMISSION: 'kiln',
      KILN_QUEUE_TTL_SECONDS: '86400',
      KILN_OPERATOR_UNSCHEDULABLE_SECONDS: '900',
    };
    expect(admissionEnv(render())).toEqual([defaults, defaults]);

    const limited = admissionEnv(
      render(
        merge(DATABASE, {
          builds: { admission: { maxRunning: 0, tenantMaxRunning: 4, tenantMaxQueued: 100 } },
        }),
      ),
    );
    const expected = {
      ...defaults,
      KILN_MAX_RUNNING: '0',
      KILN_TENANT_MAX_RUNNING: '4',
      KILN_TENANT_MAX_QUEUED: '100',
    };
    expect(limited).toEqual([expected, expected]);
    expect(loadConfig({ ...expected, KILN_RUNNER: 'local' }).admission).toMatchObject({
      maxRunning: 0,
      tenantMaxRunning: 4,
      tenantMaxQueued: 100,
      queueTtlMs: 86_400_000,
    });

    // Kueue: its LocalQueues, no installation limit, and the operator may watch Workloads.
    const tenant = '0a9e4c1e-6b1f-4c7e-9a51-2f3d4e5f6a7b';
    const kueue = render(
      merge(DATABASE, {
        builds: { admission: { mode: 'kueue', kueueLocalQueues: { [tenant]: 'team-a' } } },
      }),
    );
    const kueueEnv = {
      ...defaults,
      KILN_ADMISSION: 'kueue',
      KILN_KUEUE_LOCAL_QUEUE: 'kiln',
      KILN_KUEUE_LOCAL_QUEUES: `${tenant}=team-a`,
    };
    expect(admissionEnv(kueue)).toEqual([kueueEnv, kueueEnv]);
    for (const role of find(kueue, 'Role', 'kiln-operator'))
      expect(role.rules).toContainEqual({
        apiGroups: ['kueue.x-k8s.io'],
        resources: ['workloads'],
        verbs: ['list', 'watch'],
      });
  });

  it('routes the API and the WebSocket through an Ingress when asked, and ships a helm test', () => {
    const chart = render(undefined, [join(CHART, 'ci', 'ingress-values.yaml')]);
    const ingress = one(chart, 'Ingress', 'kiln');
    expect(ingress.spec.rules[0].http.paths).toEqual([
      {
        path: '/',
        pathType: 'Prefix',
        backend: { service: { name: 'kiln', port: { name: 'http' } } },
      },
    ]);
    expect(ingress.spec.tls).toEqual([{ hosts: ['kiln.example.com'], secretName: 'kiln-tls' }]);
    expect(env(one(chart, 'Deployment', 'kiln-api'), 'KILN_TRUST_PROXY_HOPS')?.value).toBe('1');
    // Webhook URLs and commit-status links name the Ingress host unless api.publicUrl says else.
    expect(env(one(chart, 'Deployment', 'kiln-api'), 'KILN_PUBLIC_URL')?.value).toBe(
      'https://kiln.example.com',
    );
    expect(env(one(render(), 'Deployment', 'kiln-api'), 'KILN_PUBLIC_URL')).toBeUndefined();
    expect(
      env(
        one(
          render({ ...DATABASE, api: { publicUrl: 'https://ci.example.org/kiln' } }),
          'Deployment',
          'kiln-api',
        ),
        'KILN_PUBLIC_URL',
      )?.value,
    ).toBe('https://ci.example.org/kiln');
    expect(find(render(), 'Ingress')).toEqual([]);

    const test = one(chart, 'Pod', 'kiln-test-readyz');
    expect(test.metadata.annotations['helm.sh/hook']).toBe('test');
    expect(test.spec.containers[0].command.at(-1)).toBe('http://kiln.kiln.svc:80/readyz');
    const service = one(chart, 'Service', 'kiln');
    expect(service.spec.selector).toEqual(
      one(chart, 'Deployment', 'kiln-api').spec.selector.matchLabels,
    );
  });

  it("keeps the README's values tables in step with values.yaml", () => {
    const rows = chartValues.valuesRows();
    expect(rows.length).toBeGreaterThan(40);
    expect(chartValues.readmeRows(readFileSync(join(CHART, 'README.md'), 'utf8'))).toEqual(rows);
    // Every value the install guide (docs/install-kubernetes.md) names exists.
    const guide = readFileSync(join(ROOT, 'docs', 'install-kubernetes.md'), 'utf8');
    const named = [
      ...guide.matchAll(
        /`((?:image|database|postgresql|jwt|bootstrapAdmin|builds|api|operator|service|ingress|metrics|crds)\.[A-Za-z.]+)`/g,
      ),
    ].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(10);
    const known = new Set(
      rows.flatMap((r) => [
        r.key,
        ...r.key.split('.').map((_, i, parts) => parts.slice(0, i + 1).join('.')),
      ]),
    );
    for (const name of named)
      expect({ name, known: known.has(name) }).toEqual({ name, known: true });
  });

  describe('applied with the real kubectl to the API server double', () => {
    let server: KubeApiServer;
    let dir: string;
    let kubeconfig: string;

    beforeAll(async () => {
      server = await KubeApiServer.start({ namespaces: ['default', 'kiln'] });
      dir = mkdtempSync(join(tmpdir(), 'kiln-chart-'));
      kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server.url, 'kiln');
    });

    afterAll(async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('accepts every example with --dry-run=server once the chart installed the CRD, and serves Builds', async () => {
      for (const [index, values] of [[], ...EXAMPLES.map((file) => [file])].entries()) {
        const chart = render(index === 0 ? DATABASE : undefined, values);
        const crds = chart.documents.filter((d) => d.object.kind === 'CustomResourceDefinition');
        const rest = chart.documents.filter((d) => d.object.kind !== 'CustomResourceDefinition');
        const crdFile = join(dir, `crd-${index}.yaml`);
        const restFile = join(dir, `rest-${index}.yaml`);
        writeFileSync(crdFile, crds.map((d) => d.text).join('\n---\n'));
        writeFileSync(restFile, rest.map((d) => d.text).join('\n---\n'));
        const installed = await kubectlWith(kubeconfig, dir, 'apply', '-f', crdFile);
        expect({ stderr: installed.stderr, code: installed.code }).toEqual({ stderr: '', code: 0 });
        // The build namespaces must exist for their namespaced objects even in a dry run. (`kubectl
        // create namespace` sends protobuf, which the double does not read.)
        const namespaces = join(dir, 'namespaces.yaml');
        writeFileSync(
          namespaces,
          ['kiln-builds-restricted', 'kiln-builds', 'kiln-builds-privileged', 'team-builds']
            .map((name) => `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${name}\n`)
            .join('---\n'),
        );
        const created = await kubectlWith(kubeconfig, dir, 'apply', '-f', namespaces);
        expect(created.code).toBe(0);
        const before = server.store.currentRv;
        const dry = await kubectlWith(kubeconfig, dir, 'apply', '--dry-run=server', '-f', restFile);
        expect({ stderr: dry.stderr, code: dry.code }).toEqual({ stderr: '', code: 0 });
        expect(dry.stdout).toMatch(
          /deployment\.apps\/kiln-api (created|configured) \(server dry run\)/,
        );
        expect(server.store.currentRv).toBe(before);
      }
      // The CRD the chart installed is served: a Build applies and `kubectl get kb` lists it.
      const build = await kubectlWith(
        kubeconfig,
        dir,
        'apply',
        '-n',
        'kiln-builds',
        '-f',
        join(ROOT, 'config', 'samples', 'build-kaniko.yaml'),
      );
      expect({ stderr: build.stderr, code: build.code }).toEqual({ stderr: '', code: 0 });
      const listed = await kubectlWith(kubeconfig, dir, 'get', 'kb', '-n', 'kiln-builds');
      expect(listed.stdout).toMatch(/NUMBER\s+METHOD\s+STATUS\s+REASON\s+AGE/);
    });
  });
});
