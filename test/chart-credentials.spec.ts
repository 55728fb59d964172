import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { renderChart, type RenderedChart } from './support/helm/render.js';
import { type PodSpec, restrictedViolations } from './support/pod-security.js';

/**
 * The chart's ways in for secret-manager credentials (issue 15): ServiceAccount annotations (IRSA,
 * AKS workload identity), pod labels and annotations (the workload-identity webhook selects pods
 * by label), and Secrets mounted read-only as the files a tenant's settings name (Vault
 * `tokenFile`, AWS `credentialsFile`, …). Rendered with Helm's own template engine, as
 * test/chart.spec.ts does.
 */
const ROOT = join(__dirname, '..');
const CHART = join(ROOT, 'charts', 'kiln');
const DATABASE = { database: { existingSecret: 'kiln-database' } };
const COMPONENTS = ['operator', 'api'] as const;
/** The scrape annotations every kiln pod carries by default (metrics.scrapeAnnotations). */
const SCRAPE = {
  'prometheus.io/scrape': 'true',
  'prometheus.io/port': '9090',
  'prometheus.io/path': '/metrics',
};
type Component = (typeof COMPONENTS)[number];

type Obj = Record<string, any>;

const render = (values: Obj = {}, skipSchemaValidation = false): RenderedChart =>
  renderChart({
    chartDir: CHART,
    releaseName: 'kiln',
    namespace: 'kiln',
    values: { ...DATABASE, ...values },
    skipSchemaValidation,
  });
/** The templates' own guards, reached past values.schema.json as `--skip-schema-validation` does. */
const renderUnchecked = (values: Obj): RenderedChart => render(values, true);
const one = (chart: RenderedChart, kind: string, name: string): Obj => {
  const found = chart.documents
    .map((d) => d.object as Obj)
    .filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const account = (chart: RenderedChart, component: Component): Obj =>
  one(chart, 'ServiceAccount', `kiln-${component}`);
const pod = (chart: RenderedChart, component: Component): Obj =>
  one(chart, 'Deployment', `kiln-${component}`).spec.template as Obj;
const other = (component: Component): Component => (component === 'api' ? 'operator' : 'api');

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

describe("the chart's secret-manager credentials (charts/kiln)", () => {
  it('adds no account annotations, pod labels, pod annotations or volumes by default', () => {
    const chart = render();
    for (const component of COMPONENTS) {
      expect(account(chart, component).metadata.annotations).toBeUndefined();
      const deployment = one(chart, 'Deployment', `kiln-${component}`);
      const template = deployment.spec.template as Obj;
      // The pod carries the Deployment's own labels and the scrape annotations, nothing more.
      expect(template.metadata).toEqual({
        labels: deployment.metadata.labels,
        annotations: SCRAPE,
      });
      expect((template.spec.volumes as Obj[]).map((v) => v.name)).toEqual(['data', 'tmp']);
      expect((template.spec.containers[0].volumeMounts as Obj[]).map((m) => m.name)).toEqual([
        'data',
        'tmp',
      ]);
    }
  });

  it.each(COMPONENTS)(
    'puts %s.serviceAccount.annotations on that ServiceAccount only, every value a string',
    (component) => {
      const annotations = {
        'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/kiln',
        'azure.workload.identity/client-id': '00000000-0000-0000-0000-000000000001',
        // What `--set …sts-regional-endpoints=true` gives: a boolean, which Kubernetes refuses.
        'eks.amazonaws.com/sts-regional-endpoints': true,
      };
      const chart = render({ [component]: { serviceAccount: { annotations } } });
      expect(account(chart, component).metadata.annotations).toEqual({
        ...annotations,
        'eks.amazonaws.com/sts-regional-endpoints': 'true',
      });
      expect(account(chart, component).automountServiceAccountToken).toBe(false);
      expect(account(chart, other(component)).metadata.annotations).toBeUndefined();
      expect(schemaErrors([account(chart, component)])).toEqual([]);
    },
  );

  it.each(COMPONENTS)(
    "puts %s.podLabels and podAnnotations on that component's pods, beside its own labels",
    (component) => {
      const chart = render({
        [component]: {
          podLabels: { 'azure.workload.identity/use': true, team: 'platform' },
          podAnnotations: { 'vault.example.com/role': 'kiln' },
        },
      });
      const deployment = one(chart, 'Deployment', `kiln-${component}`);
      const template = deployment.spec.template as Obj;
      expect(template.metadata.labels).toEqual({
        ...deployment.metadata.labels,
        'azure.workload.identity/use': 'true',
        team: 'platform',
      });
      expect(template.metadata.annotations).toEqual({
        ...SCRAPE,
        'vault.example.com/role': 'kiln',
      });
      // The selector still picks the pods out, and the other component is untouched.
      expect(template.metadata.labels).toMatchObject(deployment.spec.selector.matchLabels);
      expect(deployment.metadata.labels).not.toHaveProperty(['azure.workload.identity/use']);
      expect(pod(chart, other(component)).metadata.annotations).toEqual(SCRAPE);
      expect(pod(chart, other(component)).metadata.labels).not.toHaveProperty(['team']);
      expect(schemaErrors([deployment])).toEqual([]);
    },
  );

  it.each(COMPONENTS)(
    'mounts each of %s.credentialSecrets read-only, mode 0400, at its mountPath or under /var/run/kiln/credentials',
    (component) => {
      const chart = render({
        [component]: {
          credentialSecrets: [
            { name: 'vault-token' },
            { name: 'corp-ca.pem', mountPath: '/etc/kiln/ca/' },
          ],
        },
      });
      const spec = pod(chart, component).spec as PodSpec & Obj;
      const container = spec.containers[0] as Obj;
      expect((spec.volumes as Obj[]).slice(2)).toEqual([
        { name: 'credentials-0', secret: { secretName: 'vault-token', defaultMode: 0o400 } },
        { name: 'credentials-1', secret: { secretName: 'corp-ca.pem', defaultMode: 0o400 } },
      ]);
      expect((container.volumeMounts as Obj[]).slice(2)).toEqual([
        {
          name: 'credentials-0',
          mountPath: '/var/run/kiln/credentials/vault-token',
          readOnly: true,
        },
        { name: 'credentials-1', mountPath: '/etc/kiln/ca', readOnly: true },
      ]);
      // Mode 0400 files belong to root: kiln's user (not root) reads them only as a member of the
      // pod's fsGroup, to which the kubelet gives read access on the volume's files.
      const security = (spec as Obj).securityContext as Obj;
      expect(security.runAsUser).not.toBe(0);
      expect(security.fsGroup).toEqual(expect.any(Number));
      expect(restrictedViolations(spec)).toEqual([]);
      expect(pod(chart, other(component)).spec.volumes).toHaveLength(2);
      expect(schemaErrors([one(chart, 'Deployment', `kiln-${component}`)])).toEqual([]);
    },
  );

  it('accepts a Secret name of 253 characters', () => {
    const name = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    expect(name).toHaveLength(253);
    const chart = render({ operator: { credentialSecrets: [{ name }] } });
    expect(pod(chart, 'operator').spec.volumes[2].secret.secretName).toBe(name);
  });

  it.each([
    ['capitals and an underscore', 'Vault_Token'],
    ['a trailing dash', 'vault-token-'],
    ['a leading dot', '.vault-token'],
    ['a slash', 'kiln/vault-token'],
    ['254 characters', 'a'.repeat(254)],
    ['nothing', ''],
  ])('stops the render on a Secret name with %s, naming the entry', (_what, name) => {
    const values = { operator: { credentialSecrets: [{ name: 'vault-token' }, { name }] } };
    // helm checks values.schema.json first; the template refuses too, when the schema is skipped.
    expect(() => render(values)).toThrow(
      /values don't meet the specifications of the schema.*\n.*\n- at '\/operator\/credentialSecrets\/1\/name'/,
    );
    expect(() => renderUnchecked(values)).toThrow(
      `operator.credentialSecrets[1].name "${name}" is not a Secret name: a DNS-1123 subdomain`,
    );
  });

  it('stops the render on an entry that is not a map, a relative mountPath or a mountPath in use', () => {
    expect(() => renderUnchecked({ api: { credentialSecrets: ['vault-token'] } })).toThrow(
      'api.credentialSecrets[0] must be a map',
    );
    expect(() =>
      renderUnchecked({ operator: { credentialSecrets: [{ name: 'ca', mountPath: 'etc/ca' }] } }),
    ).toThrow('operator.credentialSecrets[0].mountPath "etc/ca" must be an absolute path');
    expect(() =>
      renderUnchecked({ operator: { credentialSecrets: [{ name: 'ca' }, { name: 'ca' }] } }),
    ).toThrow(
      'operator.credentialSecrets[1]: mountPath /var/run/kiln/credentials/ca is taken by operator.credentialSecrets[0]',
    );
    expect(() =>
      renderUnchecked({
        operator: {
          credentialSecrets: [
            { name: 'token', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount/' },
          ],
        },
      }),
    ).toThrow('is taken by the service-account token');
    expect(() =>
      renderUnchecked({ operator: { credentialSecrets: [{ name: 'ca', mountPath: '/tmp' }] } }),
    ).toThrow('is taken by the temporary directory');
  });

  describe('values.schema.json', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(
      JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as object,
    );
    const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Obj;
    const problems = (component: Component, values: Obj): string[] => {
      const merged = { ...defaults, [component]: { ...defaults[component], ...values } };
      return validate(merged)
        ? []
        : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
    };

    it.each(COMPONENTS)('accepts every credential value of %s', (component) => {
      expect(
        problems(component, {
          serviceAccount: {
            annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/k' },
          },
          podLabels: { 'azure.workload.identity/use': 'true' },
          podAnnotations: { note: 'x' },
          credentialSecrets: [{ name: 'vault-token' }, { name: 'ca', mountPath: '/etc/ca' }],
        }),
      ).toEqual([]);
    });

    const entry = '/operator/credentialSecrets/0';
    it.each([
      ['a Secret name with capitals', { credentialSecrets: [{ name: 'Vault' }] }, `${entry}/name`],
      ['an entry without a name', { credentialSecrets: [{ mountPath: '/etc/ca' }] }, entry],
      ['a misspelt key', { credentialSecrets: [{ name: 'ca', mountpath: '/etc/ca' }] }, entry],
      [
        'a relative mountPath',
        { credentialSecrets: [{ name: 'ca', mountPath: 'ca' }] },
        `${entry}/mountPath`,
      ],
      ['an unknown account key', { serviceAccount: { name: 'mine' } }, '/operator/serviceAccount'],
    ])('rejects %s', (_what, values: Obj, path) => {
      expect(problems('operator', values)).toContainEqual(expect.stringMatching(`^${path} `));
    });
  });
});
