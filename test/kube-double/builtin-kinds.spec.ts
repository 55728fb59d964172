import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { KubeApiServer } from '../support/kube/api-server.js';
import { expectStatus, FIXTURES_DIR, k8s, kubeConfigFor } from '../support/kube/client.js';
import { writeKubeconfig } from '../support/kube/kubeconfig.js';
import { type KubectlRun, kubectlWith } from '../support/kube/kubectl.js';
import { unpromised } from '../support/kube/conformance.js';

const NS = 'builds';
const ALL_KINDS = join(FIXTURES_DIR, 'builtin-kinds', 'all-kinds.yaml');
const UID = /^[0-9a-f-]{36}$/;

type Manifest = k8s.KubernetesObject & {
  apiVersion: string;
  kind: string;
  metadata: k8s.V1ObjectMeta & { name: string };
  [field: string]: any;
};

/** The fixture's objects, one of each kind, parsed afresh (tests may change their copies). */
const manifests = (): Manifest[] =>
  parseAllDocuments(readFileSync(ALL_KINDS, 'utf8')).map((d) => d.toJS() as Manifest);

/** The fixture's object of a kind, under another name when given. */
function manifest(kind: string, name?: string): Manifest {
  const found = manifests().find((m) => m.kind === kind);
  if (!found) throw new Error(`no ${kind} in ${ALL_KINDS}`);
  if (name !== undefined) found.metadata.name = name;
  return found;
}

/** How Kubernetes 1.32 serves each kind (`kubectl api-resources`, and /status where it has one). */
const SERVED = [
  ['Deployment', 'apps/v1', 'deployments', true, ['deploy'], ['all'], true],
  ['StatefulSet', 'apps/v1', 'statefulsets', true, ['sts'], ['all'], true],
  ['Service', 'v1', 'services', true, ['svc'], ['all'], true],
  ['ResourceQuota', 'v1', 'resourcequotas', true, ['quota'], [], true],
  ['LimitRange', 'v1', 'limitranges', true, ['limits'], [], false],
  ['PersistentVolumeClaim', 'v1', 'persistentvolumeclaims', true, ['pvc'], [], true],
  ['Role', 'rbac.authorization.k8s.io/v1', 'roles', true, [], [], false],
  ['RoleBinding', 'rbac.authorization.k8s.io/v1', 'rolebindings', true, [], [], false],
  ['ClusterRole', 'rbac.authorization.k8s.io/v1', 'clusterroles', false, [], [], false],
  [
    'ClusterRoleBinding',
    'rbac.authorization.k8s.io/v1',
    'clusterrolebindings',
    false,
    [],
    [],
    false,
  ],
  ['NetworkPolicy', 'networking.k8s.io/v1', 'networkpolicies', true, ['netpol'], [], false],
  ['Ingress', 'networking.k8s.io/v1', 'ingresses', true, ['ing'], [], true],
  ['PodDisruptionBudget', 'policy/v1', 'poddisruptionbudgets', true, ['pdb'], [], true],
  [
    'CustomResourceDefinition',
    'apiextensions.k8s.io/v1',
    'customresourcedefinitions',
    false,
    ['crd', 'crds'],
    ['api-extensions'],
    true,
  ],
] as const;

const isNamespaced = (kind: string): boolean => SERVED.find((s) => s[0] === kind)?.[3] ?? false;

/** The identifying part of an object, what KubernetesObjectApi needs to find it. */
const header = (m: Manifest): Manifest => ({
  apiVersion: m.apiVersion,
  kind: m.kind,
  metadata: { name: m.metadata.name, ...(isNamespaced(m.kind) ? { namespace: NS } : {}) },
});

describe(`${KubeApiServer.name} built-in kinds for Helm charts`, () => {
  let server: KubeApiServer;
  let objects: k8s.KubernetesObjectApi;
  let extensions: k8s.ApiextensionsV1Api;
  let custom: k8s.CustomObjectsApi;

  const getJson = async (path: string): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${server.url}${path}`);
    return { status: response.status, body: await response.json() };
  };
  const mergePatch = (m: Manifest): Promise<Manifest> =>
    objects.patch(m, undefined, undefined, undefined, undefined, k8s.PatchStrategy.MergePatch);
  const invalidMessage = async (m: Manifest): Promise<string | undefined> =>
    (await expectStatus(objects.create(m))).message;

  beforeAll(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS] });
    const config = kubeConfigFor(server.url, NS);
    objects = k8s.KubernetesObjectApi.makeApiClient(config);
    extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
    custom = config.makeApiClient(k8s.CustomObjectsApi);
  });

  afterAll(async () => {
    await server.stop();
  });

  describe('discovery', () => {
    it.each(SERVED)(
      'advertises %s in %s as Kubernetes 1.32 does',
      async (kind, apiVersion, plural, namespaced, shortNames, categories, status) => {
        const path = apiVersion === 'v1' ? '/api/v1' : `/apis/${apiVersion}`;
        const { body } = await getJson(path);
        const resources = body.resources as { name: string }[];
        expect(resources.find((r) => r.name === plural)).toEqual({
          name: plural,
          singularName: kind.toLowerCase(),
          namespaced,
          kind,
          verbs: [
            'create',
            'delete',
            'deletecollection',
            'get',
            'list',
            'patch',
            'update',
            'watch',
          ],
          ...(shortNames.length > 0 ? { shortNames } : {}),
          ...(categories.length > 0 ? { categories } : {}),
          storageVersionHash: expect.any(String),
        });
        expect(resources.some((r) => r.name === `${plural}/status`)).toBe(status);
      },
    );
  });

  describe('create, get, list, patch, delete', () => {
    it.each(SERVED.map(([kind]) => kind))(
      'creates, reads, lists, merge-patches and deletes a %s over HTTP',
      async (kind) => {
        const body = manifest(kind);
        const namespace = isNamespaced(kind) ? NS : undefined;
        const created = await objects.create(body);
        expect(created.metadata?.uid).toMatch(UID);
        expect(created.metadata?.namespace).toBe(namespace);

        const read = await objects.read(header(body));
        expect(read.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
        const list = await objects.list(body.apiVersion, kind, namespace);
        expect(list.items.map((i) => i.metadata?.name)).toEqual([body.metadata.name]);

        const labelled = header(body);
        labelled.metadata.labels = { 'kiln.dev/patched': 'yes' };
        const patched = await mergePatch(labelled);
        expect(patched.metadata?.labels).toMatchObject({ 'kiln.dev/patched': 'yes' });
        expect(
          server.object(body.apiVersion, kind, namespace, body.metadata.name)?.metadata.labels,
        ).toMatchObject({ 'kiln.dev/patched': 'yes' });

        await objects.delete(header(body));
        expect((await expectStatus(objects.read(header(body)))).code).toBe(404);
        expect(server.objects(body.apiVersion, kind)).toEqual([]);
      },
    );

    it('strategic-merge-patches the ports of a Service by port number', async () => {
      const service = manifest('Service', 'ports');
      await objects.create(service);
      const patch = { ...header(service), spec: { ports: [{ port: 80, targetPort: 3000 }] } };
      const patched = await objects.patch(patch);
      expect(patched.spec.ports).toEqual([
        { name: 'http', port: 80, protocol: 'TCP', targetPort: 3000 },
      ]);
    });

    it('keeps fields it has no rule for, as the double does for every built-in', async () => {
      await custom.createNamespacedCustomObject({
        group: 'apps',
        version: 'v1',
        namespace: NS,
        plural: 'deployments',
        body: { ...manifest('Deployment', 'keeps-fields'), extra: { kept: true } },
      });
      expect(server.object('apps/v1', 'deployments', NS, 'keeps-fields')?.extra).toEqual({
        kept: true,
      });
    });
  });

  describe('server-side defaults', () => {
    it('defaults a Deployment: strategy, history, pod spec; generation follows the spec only', async () => {
      const created = await objects.create(manifest('Deployment', 'defaults'));
      expect(created.spec).toMatchObject({
        replicas: 2,
        revisionHistoryLimit: 10,
        progressDeadlineSeconds: 600,
        strategy: {
          type: 'RollingUpdate',
          rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' },
        },
        template: { spec: { restartPolicy: 'Always', dnsPolicy: 'ClusterFirst' } },
      });
      expect(created.metadata.generation).toBe(1);
      const relabelled = header(created);
      relabelled.metadata.labels = { tier: 'web' };
      expect((await mergePatch(relabelled)).metadata.generation).toBe(1);
      expect(
        (await mergePatch({ ...header(created), spec: { replicas: 3 } })).metadata.generation,
      ).toBe(2);
    });

    it('accepts a ClusterIP Service with a selector and fills type, protocol and targetPort', async () => {
      const body = manifest('Service', 'plain');
      body.spec.ports = [{ port: 8080 }];
      const created = await objects.create(body);
      expect(created.spec).toMatchObject({
        type: 'ClusterIP',
        sessionAffinity: 'None',
        selector: { 'app.kubernetes.io/name': 'web' },
        ports: [{ port: 8080, protocol: 'TCP', targetPort: 8080 }],
      });
    });

    it('implies the Ingress policy type of a NetworkPolicy that names none', async () => {
      const body = manifest('NetworkPolicy', 'implied');
      delete body.spec.policyTypes;
      delete body.spec.egress;
      expect((await objects.create(body)).spec.policyTypes).toEqual(['Ingress']);
    });

    it('defaults the API group of User subjects of a RoleBinding', async () => {
      const body = manifest('RoleBinding', 'user');
      body.subjects = [{ kind: 'User', name: 'jane' }];
      expect((await objects.create(body)).subjects).toEqual([
        { kind: 'User', name: 'jane', apiGroup: 'rbac.authorization.k8s.io' },
      ]);
    });
  });

  describe('CustomResourceDefinitions', () => {
    const GADGETS = { group: 'fixtures.kiln.dev', version: 'v1', namespace: NS, plural: 'gadgets' };
    const gadget = (name: string, size: number): object => ({
      apiVersion: 'fixtures.kiln.dev/v1',
      kind: 'Gadget',
      metadata: { name },
      spec: { size },
    });

    it('changes nothing on a dry-run create', async () => {
      const before = server.store.currentRv;
      const answer = await extensions.createCustomResourceDefinition({
        body: manifest('CustomResourceDefinition') as k8s.V1CustomResourceDefinition,
        dryRun: 'All',
      });
      expect(answer.status?.conditions?.map((c) => c.type)).toEqual([
        'NamesAccepted',
        'Established',
      ]);
      expect(server.store.currentRv).toBe(before);
      expect((await getJson('/apis/fixtures.kiln.dev/v1')).status).toBe(404);
    });

    it('serves a CRD created over HTTP from then on: discovery, OpenAPI, schema validation', async () => {
      const created = await extensions.createCustomResourceDefinition({
        body: manifest('CustomResourceDefinition') as k8s.V1CustomResourceDefinition,
      });
      expect(created.spec.names).toMatchObject({ singular: 'gadget', listKind: 'GadgetList' });
      expect(created.status?.acceptedNames?.kind).toBe('Gadget');
      expect(created.status?.storedVersions).toEqual(['v1']);
      expect(created.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe(
        'True',
      );

      const discovery = await getJson('/apis/fixtures.kiln.dev/v1');
      expect(discovery.body.resources[0]).toMatchObject({ name: 'gadgets', shortNames: ['gd'] });
      const openapi = await getJson('/openapi/v3');
      expect(Object.keys(openapi.body.paths)).toContain('apis/fixtures.kiln.dev/v1');

      await custom.createNamespacedCustomObject({ ...GADGETS, body: gadget('g1', 3) });
      expect(server.object('fixtures.kiln.dev/v1', 'gadgets', NS, 'g1')?.spec).toEqual({ size: 3 });
      const refused = await expectStatus(
        custom.createNamespacedCustomObject({ ...GADGETS, body: gadget('g0', 0) }),
      );
      expect(refused.message).toBe(
        'Gadget.fixtures.kiln.dev "g0" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1',
      );
    });

    it('changes the OpenAPI hash of a group-version when its CRD changes', async () => {
      const urlOf = async (): Promise<string> =>
        (await getJson('/openapi/v3')).body.paths['apis/fixtures.kiln.dev/v1'].serverRelativeURL;
      const before = await urlOf();
      const crd = manifest('CustomResourceDefinition');
      crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.colour = {
        type: 'string',
      };
      await mergePatch({ ...header(crd), spec: { versions: crd.spec.versions } });
      const after = await urlOf();
      expect(after).not.toBe(before);
      const document = await getJson(after);
      expect(JSON.stringify(document.body)).toContain('"colour":{"type":"string"}');
    });

    it('stops serving a deleted CRD and deletes its objects', async () => {
      await extensions.deleteCustomResourceDefinition({ name: 'gadgets.fixtures.kiln.dev' });
      await server.settled();
      expect((await getJson('/apis/fixtures.kiln.dev/v1')).status).toBe(404);
      expect(server.store.list('fixtures.kiln.dev/gadgets')).toEqual([]);
    });

    it('stores the CRDs of crdDirectories as objects, established', async () => {
      const withCrds = await KubeApiServer.start({ crdDirectories: [FIXTURES_DIR] });
      try {
        const api = kubeConfigFor(withCrds.url).makeApiClient(k8s.ApiextensionsV1Api);
        const crd = await api.readCustomResourceDefinition({ name: 'builds.kiln.dev' });
        expect(crd.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');
        expect(crd.metadata?.generation).toBe(1);
      } finally {
        await withCrds.stop();
      }
    });

    it('rejects a CRD whose name is not <plural>.<group>', async () => {
      expect(await invalidMessage(manifest('CustomResourceDefinition', 'gadgets'))).toBe(
        'CustomResourceDefinition.apiextensions.k8s.io "gadgets" is invalid: metadata.name: Invalid value: "gadgets": must be spec.names.plural+"."+spec.group',
      );
    });
  });

  describe('validation, as the real server words it', () => {
    it.each(['Deployment', 'StatefulSet'])('rejects a %s without spec.selector', async (kind) => {
      const body = manifest(kind, 'no-selector');
      delete body.spec.selector;
      body.spec.template.metadata.labels = { app: 'web' };
      const status = await expectStatus(objects.create(body));
      expect(status).toMatchObject({ code: 422, reason: 'Invalid' });
      expect(status.message).toBe(
        `${kind}.apps "no-selector" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: \`selector\` does not match template \`labels\`]`,
      );
      expect(status.details.causes[0]).toEqual({
        reason: 'FieldValueRequired',
        message: 'Required value',
        field: 'spec.selector',
      });
    });

    it('rejects a Deployment whose selector does not match its template labels', async () => {
      const body = manifest('Deployment', 'mismatch');
      body.spec.template.metadata.labels = { 'app.kubernetes.io/name': 'api', tier: 'web' };
      expect(await invalidMessage(body)).toBe(
        'Deployment.apps "mismatch" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app.kubernetes.io/name":"api", "tier":"web"}: `selector` does not match template `labels`',
      );
    });

    it('rejects a StatefulSet whose selector expression does not match its template labels', async () => {
      const body = manifest('StatefulSet', 'mismatch');
      body.spec.template.metadata.labels = { app: 'cache' };
      expect(await invalidMessage(body)).toBe(
        'StatefulSet.apps "mismatch" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"cache"}: `selector` does not match template `labels`',
      );
    });

    it('refuses to change the selector of a Deployment (the classic failed helm upgrade)', async () => {
      const body = manifest('Deployment', 'fixed-selector');
      await objects.create(body);
      const moved = header(body);
      moved.spec = {
        selector: { matchLabels: { app: 'other' } },
        template: { metadata: { labels: { app: 'other' } } },
      };
      expect((await expectStatus(mergePatch(moved))).message).toBe(
        'Deployment.apps "fixed-selector" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"other", "app.kubernetes.io/name":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable',
      );
    });

    it('refuses StatefulSet spec changes other than the ones allowed, but allows replicas', async () => {
      const body = manifest('StatefulSet', 'claims');
      await objects.create(body);
      expect((await mergePatch({ ...header(body), spec: { replicas: 3 } })).spec.replicas).toBe(3);
      const status = await expectStatus(
        mergePatch({ ...header(body), spec: { serviceName: 'x' } }),
      );
      expect(status.message).toBe(
        "StatefulSet.apps \"claims\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
      );
    });

    it('rejects a Service port outside 1-65535', async () => {
      const body = manifest('Service', 'bad-port');
      body.spec.ports = [{ name: 'http', port: 70000, targetPort: 8080 }];
      const status = await expectStatus(objects.create(body));
      expect(status.message).toBe(
        'Service "bad-port" is invalid: spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive',
      );
      expect(status.details).toMatchObject({ name: 'bad-port', kind: 'Service' });
    });

    it('rejects a Service with two unnamed ports', async () => {
      const body = manifest('Service', 'unnamed');
      body.spec.ports = [{ port: 80 }, { port: 443 }];
      expect(await invalidMessage(body)).toBe(
        'Service "unnamed" is invalid: [spec.ports[0].name: Required value, spec.ports[1].name: Required value]',
      );
    });

    it.each(['RoleBinding', 'ClusterRoleBinding'])('rejects a %s without roleRef', async (kind) => {
      const body = manifest(kind, 'no-ref');
      delete body.roleRef;
      const kinds = kind === 'RoleBinding' ? '"Role", "ClusterRole"' : '"ClusterRole"';
      expect(await invalidMessage(body)).toBe(
        `${kind}.rbac.authorization.k8s.io "no-ref" is invalid: [roleRef.apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io", roleRef.kind: Unsupported value: "": supported values: ${kinds}, roleRef.name: Required value]`,
      );
    });

    it.each(['RoleBinding', 'ClusterRoleBinding'])(
      'refuses to change the roleRef of a %s',
      async (kind) => {
        const body = manifest(kind, 'fixed-ref');
        await objects.create(body);
        const changed = {
          ...header(body),
          roleRef: { ...body.roleRef, kind: 'ClusterRole', name: 'view' },
        };
        expect((await expectStatus(mergePatch(changed))).message).toBe(
          `${kind}.rbac.authorization.k8s.io "fixed-ref" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"view"}: cannot change roleRef`,
        );
        const subjects = { ...header(body), subjects: [{ kind: 'Group', name: 'ops' }] };
        expect((await mergePatch(subjects)).subjects).toEqual([
          { kind: 'Group', name: 'ops', apiGroup: 'rbac.authorization.k8s.io' },
        ]);
      },
    );

    it('rejects a ClusterRoleBinding to a service account without its namespace', async () => {
      const body = manifest('ClusterRoleBinding', 'no-namespace');
      body.subjects = [{ kind: 'ServiceAccount', name: 'kiln' }];
      expect(await invalidMessage(body)).toBe(
        'ClusterRoleBinding.rbac.authorization.k8s.io "no-namespace" is invalid: subjects[0].namespace: Required value',
      );
    });

    it('rejects a Role rule without verbs', async () => {
      const body = manifest('Role', 'no-verbs');
      body.rules = [{ apiGroups: [''], resources: ['pods'] }];
      expect(await invalidMessage(body)).toBe(
        'Role.rbac.authorization.k8s.io "no-verbs" is invalid: rules[0].verbs: Required value: verbs must contain at least one value',
      );
    });

    it('rejects a NetworkPolicy policy type other than Ingress or Egress', async () => {
      const body = manifest('NetworkPolicy', 'bad-types');
      body.spec.policyTypes = ['Ingress', 'egress'];
      expect(await invalidMessage(body)).toBe(
        'NetworkPolicy.networking.k8s.io "bad-types" is invalid: spec.policyTypes[1]: Unsupported value: "egress": supported values: "Ingress", "Egress"',
      );
    });

    it('rejects an Ingress with neither rules nor a default backend', async () => {
      const body = manifest('Ingress', 'empty');
      delete body.spec.rules;
      expect(await invalidMessage(body)).toBe(
        'Ingress.networking.k8s.io "empty" is invalid: spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified',
      );
    });

    it('rejects an Ingress path without pathType (a networking/v1beta1 habit)', async () => {
      const body = manifest('Ingress', 'no-path-type');
      delete body.spec.rules[0].http.paths[0].pathType;
      expect(await invalidMessage(body)).toBe(
        'Ingress.networking.k8s.io "no-path-type" is invalid: spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified',
      );
    });

    it('accepts a PodDisruptionBudget without a selector, as policy/v1 does', async () => {
      const body = manifest('PodDisruptionBudget', 'no-selector');
      delete body.spec.selector;
      expect((await objects.create(body)).metadata?.uid).toMatch(UID);
    });

    it('rejects a PodDisruptionBudget with both minAvailable and maxUnavailable', async () => {
      const body = manifest('PodDisruptionBudget', 'both');
      body.spec.maxUnavailable = '50%';
      expect(await invalidMessage(body)).toBe(
        'PodDisruptionBudget.policy "both" is invalid: spec: Invalid value: policy.PodDisruptionBudgetSpec{…}: minAvailable and maxUnavailable cannot be both set',
      );
    });
  });
});

/** `deployment.apps/web`: how kubectl names an object in its output. */
const kubectlName = (m: Manifest): string => {
  const group = m.apiVersion.includes('/') ? `.${m.apiVersion.split('/')[0]}` : '';
  return `${m.kind.toLowerCase()}${group}/${m.metadata.name}`;
};

const AGE = '\\d+s';
const CREATED_AT = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ';

/** `kubectl get <short name> <name>` of each fixture object: the real header and row. */
const TABLES: [string, string, string[], RegExp][] = [
  [
    'deploy',
    'web',
    ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'AGE'],
    RegExp(`^web\\s+0/2\\s+0\\s+0\\s+${AGE}$`),
  ],
  ['sts', 'db', ['NAME', 'READY', 'AGE'], RegExp(`^db\\s+0/1\\s+${AGE}$`)],
  [
    'svc',
    'web',
    ['NAME', 'TYPE', 'CLUSTER-IP', 'EXTERNAL-IP', 'PORT(S)', 'AGE'],
    RegExp(`^web\\s+ClusterIP\\s+<none>\\s+<none>\\s+80/TCP\\s+${AGE}$`),
  ],
  [
    'quota',
    'kiln',
    ['NAME', 'AGE', 'REQUEST', 'LIMIT'],
    RegExp(`^kiln\\s+${AGE}\\s+pods: 0/0, requests.cpu: 0/0\\s+limits.memory: 0/0$`),
  ],
  ['limits', 'kiln', ['NAME', 'CREATED AT'], RegExp(`^kiln\\s+${CREATED_AT}$`)],
  [
    'pvc',
    'cache',
    [
      'NAME',
      'STATUS',
      'VOLUME',
      'CAPACITY',
      'ACCESS MODES',
      'STORAGECLASS',
      'VOLUMEATTRIBUTESCLASS',
      'AGE',
    ],
    RegExp(`^cache\\s+Pending\\s+standard\\s+<unset>\\s+${AGE}$`),
  ],
  ['role', 'kiln-operator', ['NAME', 'CREATED AT'], RegExp(`^kiln-operator\\s+${CREATED_AT}$`)],
  [
    'rolebinding',
    'kiln-operator',
    ['NAME', 'ROLE', 'AGE'],
    RegExp(`^kiln-operator\\s+Role/kiln-operator\\s+${AGE}$`),
  ],
  [
    'clusterrole',
    'kiln-crd-reader',
    ['NAME', 'CREATED AT'],
    RegExp(`^kiln-crd-reader\\s+${CREATED_AT}$`),
  ],
  [
    'clusterrolebinding',
    'kiln-crd-reader',
    ['NAME', 'ROLE', 'AGE'],
    RegExp(`^kiln-crd-reader\\s+ClusterRole/kiln-crd-reader\\s+${AGE}$`),
  ],
  [
    'netpol',
    'web',
    ['NAME', 'POD-SELECTOR', 'AGE'],
    RegExp(`^web\\s+app.kubernetes.io/name=web\\s+${AGE}$`),
  ],
  [
    'ing',
    'web',
    ['NAME', 'CLASS', 'HOSTS', 'ADDRESS', 'PORTS', 'AGE'],
    RegExp(`^web\\s+nginx\\s+kiln.example.com\\s+80, 443\\s+${AGE}$`),
  ],
  [
    'pdb',
    'web',
    ['NAME', 'MIN AVAILABLE', 'MAX UNAVAILABLE', 'ALLOWED DISRUPTIONS', 'AGE'],
    RegExp(`^web\\s+1\\s+N/A\\s+0\\s+${AGE}$`),
  ],
  [
    'crd',
    'gadgets.fixtures.kiln.dev',
    ['NAME', 'CREATED AT'],
    RegExp(`^gadgets.fixtures.kiln.dev\\s+${CREATED_AT}$`),
  ],
];

describe(`${KubeApiServer.name} built-in kinds with kubectl`, () => {
  let server: KubeApiServer;
  let dir: string;
  let kubeconfig: string;

  const kubectl = (...args: string[]): Promise<KubectlRun> => kubectlWith(kubeconfig, dir, ...args);
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  beforeAll(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS] });
    dir = mkdtempSync(join(tmpdir(), 'kubectl-builtin-kinds-'));
    kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server.url, NS);
  });

  afterAll(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('accepts one object of every kind with apply --dry-run=server and stores nothing', async () => {
    const before = server.store.currentRv;
    const result = await kubectl('apply', '--dry-run=server', '-f', ALL_KINDS);
    expect(result).toEqual({
      code: 0,
      stdout: manifests()
        .map((m) => `${kubectlName(m)} created (server dry run)\n`)
        .join(''),
      stderr: '',
    });
    expect(server.store.currentRv).toBe(before);
    expect((await kubectl('get', 'crd', '-o', 'name')).stdout).toBe('');
  });

  it('applies every kind for real', async () => {
    const result = await kubectl('apply', '-f', ALL_KINDS);
    expect(result).toEqual({
      code: 0,
      stdout: manifests()
        .map((m) => `${kubectlName(m)} created\n`)
        .join(''),
      stderr: '',
    });
    for (const m of manifests())
      expect(
        server.object(m.apiVersion, m.kind, isNamespaced(m.kind) ? NS : undefined, m.metadata.name)
          ?.metadata.annotations,
      ).toHaveProperty(['kubectl.kubernetes.io/last-applied-configuration']);
  });

  it.each(TABLES)(
    'gets %s %s as a table with the real columns',
    async (resource, name, columns, row) => {
      const result = await kubectl('get', resource, name);
      expect(result.code).toBe(0);
      const [head, line] = result.stdout.trimEnd().split('\n');
      expect(head?.trim().split(/\s{2,}/)).toEqual(columns);
      expect(line).toMatch(row);
    },
  );

  it('re-applies a changed Service, merging its ports by port number', async () => {
    const service = manifest('Service');
    service.spec.ports[0].targetPort = 3000;
    const result = await kubectl('apply', '-f', file('service.yaml', JSON.stringify(service)));
    expect(result).toMatchObject({ code: 0, stdout: 'service/web configured\n', stderr: '' });
    expect(server.object('v1', 'services', NS, 'web')?.spec).toMatchObject({
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 3000 }],
    });
  });

  it('prints the real error for a Deployment whose selector does not match', async () => {
    const deployment = manifest('Deployment', 'mismatch');
    deployment.spec.template.metadata.labels = { app: 'other' };
    const result = await kubectl('apply', '-f', file('mismatch.yaml', JSON.stringify(deployment)));
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'The Deployment "mismatch" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: `selector` does not match template `labels`',
    );
  });

  it('serves the kiln CRD once applied, so kubectl applies and lists a Build, until it is deleted', async () => {
    expect(await kubectl('apply', '-f', 'crds/builds.kiln.dev.yaml')).toMatchObject({
      code: 0,
      stdout: 'customresourcedefinition.apiextensions.k8s.io/builds.kiln.dev created\n',
    });
    expect(
      await kubectl('wait', '--for=condition=Established', 'crd/builds.kiln.dev', '--timeout=5s'),
    ).toMatchObject({ code: 0 });
    const build = file(
      'build.yaml',
      'apiVersion: kiln.dev/v1alpha1\nkind: Build\nmetadata:\n  name: sample\nspec:\n  tenantId: 5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11\n  projectId: 0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22\n  method: buildx\n',
    );
    expect(await kubectl('apply', '-f', build)).toMatchObject({
      code: 0,
      stdout: 'build.kiln.dev/sample created\n',
    });
    expect((await kubectl('get', 'kb', '-o', 'name')).stdout).toBe('build.kiln.dev/sample\n');

    expect(await kubectl('delete', 'crd', 'builds.kiln.dev')).toMatchObject({
      code: 0,
      stdout: 'customresourcedefinition.apiextensions.k8s.io "builds.kiln.dev" deleted\n',
    });
    await server.settled();
    const gone = await kubectl('get', 'builds');
    expect(gone.code).toBe(1);
    // kubectl's discovery cache still lists builds, so it asks, and the double answers 404.
    expect(gone.stderr).toContain('the server could not find the requested resource');
    expect(server.store.list('kiln.dev/builds')).toEqual([]);
  });

  it('sent only requests the double promises to serve faithfully (docs/adr/0041)', () => {
    expect(unpromised(server.requests)).toEqual([]);
  });
});
