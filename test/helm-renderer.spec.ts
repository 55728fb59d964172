import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  ensureRenderer,
  renderChart,
  renderNotes,
  type RenderedChart,
  type RenderedDocument,
  type RenderOptions,
} from './support/helm/render.js';

// The expectations below are what `helm template` (Helm v3.21) prints for the probe chart, worked
// out from Helm's engine and its sigs.k8s.io/yaml toYaml (sequences not indented under their key).
const CHART = join(__dirname, 'fixtures', 'helm', 'probe-chart');

const render = (options: Partial<RenderOptions> = {}): RenderedChart =>
  renderChart({ chartDir: CHART, releaseName: 'demo', namespace: 'builds', ...options });

function find(chart: RenderedChart, kind: string, name: string): RenderedDocument {
  const found = chart.documents.find(
    (d) => d.object.kind === kind && (d.object.metadata as { name?: string }).name === name,
  );
  if (found === undefined) throw new Error(`no ${kind} ${name} in:\n${chart.stream}`);
  return found;
}

const data = (chart: RenderedChart, name: string): Record<string, string> =>
  find(chart, 'ConfigMap', name).object.data as Record<string, string>;

const scratch = mkdtempSync(join(tmpdir(), 'kiln-helm-renderer-'));
let files = 0;

function valuesFile(yaml: string): string {
  const file = join(scratch, `values-${++files}.yaml`);
  writeFileSync(file, yaml);
  return file;
}

/** A copy of the probe chart with one more template, for failures of the chart's own making. */
function chartWith(template: string): string {
  const dir = join(scratch, `chart-${++files}`);
  cpSync(CHART, dir, { recursive: true });
  writeFileSync(join(dir, 'templates', 'broken.yaml'), template);
  return dir;
}

beforeAll(() => {
  ensureRenderer(); // the first build compiles sprig: give it more than a test's time
}, 180_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe(renderChart.name, () => {
  it('prints each document under a # Source: line, in helm install order with hooks last', () => {
    const chart = render();

    expect(chart.documents.map((d) => `${d.source} ${String(d.object.kind)}`)).toEqual([
      'probe/templates/multi.yaml ServiceAccount',
      'probe/templates/configmap.yaml ConfigMap',
      'probe/templates/context.yaml ConfigMap',
      'probe/templates/files.yaml ConfigMap',
      'probe/templates/service.yaml Service',
      'probe/templates/deployment.yaml Deployment',
      'probe/templates/multi.yaml Ingress',
      'probe/templates/hooks/seed-job.yaml Job',
    ]);
    expect(
      chart.stream.startsWith('---\n# Source: probe/templates/multi.yaml\napiVersion: v1\n'),
    ).toBe(true);
  });

  it('includes defines across files with nindent, and toYaml prints as helm prints it', () => {
    const chart = render();

    expect(find(chart, 'ConfigMap', 'demo-probe').text).toBe(
      [
        'apiVersion: v1',
        'kind: ConfigMap',
        'metadata:',
        '  name: demo-probe',
        '  labels:',
        '    app.kubernetes.io/name: probe',
        '    app.kubernetes.io/instance: demo',
        '    app.kubernetes.io/version: "1.2.3"',
        '    helm.sh/chart: probe-0.3.1',
        '    team: build',
        'data:',
        '  greeting: "hello from demo"',
        '  config.yaml: |',
        '    features:',
        '    - cache',
        '    - sbom',
        '    limits:',
        '      cpu: 500m',
        '    logLevel: info',
        String.raw`  config.json: "{\"features\":[\"cache\",\"sbom\"],\"limits\":{\"cpu\":\"500m\"},\"logLevel\":\"info\"}"`,
        '  logLevelViaYaml: "info"',
        '  featuresViaJson: "cache,sbom"',
        '  firstFeatureViaYamlArray: "cache"',
        '  missingValue: ""',
        '  template: probe/templates/configmap.yaml',
        '  basePath: probe/templates',
      ].join('\n'),
    );
    // probe.port is defined in service.yaml, not in a partial, and included from deployment.yaml.
    const deployment = find(chart, 'Deployment', 'demo-probe').object as any;
    expect(deployment.spec.template.spec.containers[0].ports[0].containerPort).toBe(8080);
    expect(deployment.spec.selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'probe',
      'app.kubernetes.io/instance': 'demo',
    });
  });

  it('renders a value as a template with tpl, which sees the chart defines', () => {
    const chart = render({
      values: { greeting: '{{ .Chart.Name }} says {{ include "probe.fullname" . }}' },
    });

    expect(data(chart, 'demo-probe').greeting).toBe('probe says demo-probe');
  });

  it('round-trips values through toYaml/fromYaml, toJson/fromJson and fromYamlArray', () => {
    const config = { logLevel: 'debug', features: ['push', 'scan'], limits: { cpu: '2' } };
    const configMap = data(render({ values: { config } }), 'demo-probe');

    expect(parseYaml(configMap['config.yaml'] ?? '')).toEqual(config);
    expect(JSON.parse(configMap['config.json'] ?? '')).toEqual(config);
    expect(configMap.logLevelViaYaml).toBe('debug');
    expect(configMap.featuresViaJson).toBe('push,scan');
    expect(configMap.firstFeatureViaYamlArray).toBe('push');
  });

  it('renders a missing value as an empty string, as missingkey=zero does in helm', () => {
    expect(data(render(), 'demo-probe').missingValue).toBe('');
  });

  it('fails with the message of required, naming the template and position', () => {
    expect(() => render({ values: { secret: { enabled: true } } })).toThrow(
      'execution error at (probe/templates/secret.yaml:5:11): secret.name is required when secret.enabled is true',
    );
    const chart = render({ values: { secret: { enabled: true, name: 'probe-token' } } });
    // Helm installs a ServiceAccount before a Secret, and both before the ConfigMaps.
    expect(chart.documents.slice(0, 3).map((d) => d.object.kind)).toEqual([
      'ServiceAccount',
      'Secret',
      'ConfigMap',
    ]);
    expect(find(chart, 'Secret', 'probe-token').object.stringData).toEqual({ token: 'unset' });
  });

  it('fails with the message of fail', () => {
    expect(() => render({ values: { failWith: 'maintenance' } })).toThrow(
      'execution error at (probe/templates/guard.yaml:2:4): refusing to render: maintenance',
    );
  });

  it('reports template parse errors and output that is not YAML', () => {
    expect(() => render({ chartDir: chartWith('{{ if }}\n') })).toThrow(
      'parse error at (probe/templates/broken.yaml:1): missing value for if',
    );
    expect(() => render({ chartDir: chartWith('key: [unclosed\n') })).toThrow(
      'YAML parse error on probe/templates/broken.yaml',
    );
  });

  it('finds nothing with lookup, so `if not (lookup ...)` branches render', () => {
    const deployment = find(render(), 'Deployment', 'demo-probe').object as any;

    expect(deployment.metadata.annotations).toEqual({ 'probe.kiln.dev/seed': 'generated' });
  });

  it('merges values files in order over values.yaml, a null deleting the key', () => {
    const first = valuesFile(
      'replicaCount: 3\nlabels:\n  team: platform\n  env: staging\nconfig:\n  limits: null\nimage:\n  tag: "2.0.0"\n',
    );
    const second = valuesFile('replicaCount: 5\nlabels:\n  team: null\n  env: production\n');
    const chart = render({ valuesFiles: [first, second] });
    const deployment = find(chart, 'Deployment', 'demo-probe').object as any;

    expect(deployment.spec.replicas).toBe(5);
    expect(deployment.spec.template.spec.containers[0].image).toBe('registry.example/probe:2.0.0');
    expect(deployment.metadata.labels.env).toBe('production');
    expect(deployment.metadata.labels).not.toHaveProperty('team');
    expect(parseYaml(data(chart, 'demo-probe')['config.yaml'] ?? '')).toEqual({
      features: ['cache', 'sbom'],
      logLevel: 'info',
    });
  });

  it('merges values after the values files, like --set-json', () => {
    const file = valuesFile('replicaCount: 3\nlabels:\n  env: staging\n');
    const chart = render({
      valuesFiles: [file],
      values: { replicaCount: 7, labels: { owner: 'ci' } },
    });
    const deployment = find(chart, 'Deployment', 'demo-probe').object as any;

    expect(deployment.spec.replicas).toBe(7);
    expect(deployment.metadata.labels).toMatchObject({
      team: 'build',
      env: 'staging',
      owner: 'ci',
    });
  });

  it('reads every number in values as a float64, so a million prints as 1e+06 as in helm', () => {
    expect(data(render(), 'demo-probe-context').bigNumber).toBe('1e+06');
  });

  it('fills .Release for an install, and for an upgrade when asked', () => {
    expect(data(render(), 'demo-probe-context')).toMatchObject({
      'release.name': 'demo',
      'release.namespace': 'builds',
      'release.service': 'Helm',
      'release.isInstall': 'true',
      'release.isUpgrade': 'false',
      'release.revision': '1',
    });
    expect(data(render({ upgrade: true }), 'demo-probe-context')).toMatchObject({
      'release.isInstall': 'false',
      'release.isUpgrade': 'true',
    });
  });

  it('fills .Chart from Chart.yaml', () => {
    expect(data(render(), 'demo-probe-context')).toMatchObject({
      'chart.name': 'probe',
      'chart.version': '0.3.1',
      'chart.appVersion': '1.2.3',
      'chart.annotation': 'renderer-probe',
    });
  });

  it('fills .Capabilities with helm template defaults: Kubernetes v1.36 and the built-in APIs', () => {
    const chart = render();

    expect(data(chart, 'demo-probe-context')).toMatchObject({
      'capabilities.kubeVersion': 'v1.36.0',
      'capabilities.kubeMajor': '1',
      'capabilities.kubeMinor': '36',
      'capabilities.gitVersion': 'v1.36.0',
      'capabilities.hasAppsV1': 'true',
      'capabilities.hasMonitoringV1': 'false',
    });
    expect(chart.documents.some((d) => d.object.kind === 'ServiceMonitor')).toBe(false);
  });

  it('takes the Kubernetes version and extra API versions given', () => {
    const chart = render({ kubeVersion: 'v1.32.0', apiVersions: ['monitoring.coreos.com/v1'] });

    expect(data(chart, 'demo-probe-context')).toMatchObject({
      'capabilities.kubeVersion': 'v1.32.0',
      'capabilities.kubeMinor': '32',
      'capabilities.hasMonitoringV1': 'true',
    });
    // An unknown kind sorts after the known ones, before the hooks.
    expect(chart.documents.map((d) => d.object.kind).slice(-2)).toEqual(['ServiceMonitor', 'Job']);
  });

  it("refuses a Kubernetes version outside the chart's kubeVersion range", () => {
    expect(() => render({ kubeVersion: 'v1.24.0' })).toThrow(
      'chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.0',
    );
  });

  it('serves .Files from the chart directory, minus templates/, values.yaml and .helmignore matches', () => {
    expect(data(render(), 'demo-probe-files')).toEqual({
      'banner.txt': 'Welcome to the probe.\nBuilt by kiln.\n',
      bannerLines: '2',
      firstLine: 'Welcome to the probe.',
      absent: '',
      ignoredByHelmignore: '',
      valuesFile: '',
    });
  });

  it('parses templates whose name starts with _ but never renders them', () => {
    const chart = render();

    expect(chart.documents.filter((d) => /\/_[^/]*$/.test(d.source))).toEqual([]);
    expect(chart.stream).not.toContain('partial-must-not-render');
  });

  it('keeps NOTES.txt out of the manifests and renders it only as notes', () => {
    const chart = render();

    expect(chart.stream).not.toContain('NOTES.txt');
    expect(chart.notes).toBe('demo-probe is installed in namespace builds.\n');
    expect(renderNotes({ chartDir: CHART, upgrade: true })).toBe(
      'release-name-probe is installed in namespace default.\nThis was an upgrade.\n',
    );
  });

  it('drops documents that render empty', () => {
    const chart = render({ values: { ingress: { enabled: false } } });

    // guard.yaml, secret.yaml and servicemonitor.yaml render only whitespace; multi.yaml has a
    // leading and a trailing separator and, here, no Ingress.
    expect(chart.documents.map((d) => d.source)).not.toEqual(
      expect.arrayContaining([expect.stringMatching(/guard|secret|servicemonitor/)]),
    );
    expect(chart.documents.filter((d) => d.source.endsWith('/multi.yaml'))).toHaveLength(1);
    expect(chart.stream).not.toMatch(/^# Source: .*\n(---|$)/m);
  });

  it('prints the crds/ files first only when asked to include CRDs', () => {
    expect(render().documents.some((d) => d.object.kind === 'CustomResourceDefinition')).toBe(
      false,
    );

    const [first] = render({ includeCrds: true }).documents;
    expect(first?.source).toBe('probe/crds/probes.kiln.dev.yaml');
    expect(first?.object).toMatchObject({ metadata: { name: 'probes.kiln.dev' } });
  });
});

describe(ensureRenderer.name, () => {
  it('builds the renderer once per content of main.go', () => {
    const source = readFileSync(join(__dirname, 'support', 'helm', 'main.go'));
    const hash = createHash('sha256').update(source).digest('hex').slice(0, 16);

    expect(ensureRenderer()).toBe(join(__dirname, '..', '.cache', 'helm-render', `render-${hash}`));
    expect(ensureRenderer()).toBe(ensureRenderer());
  });
});
