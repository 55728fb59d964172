import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { stringify } from 'yaml';
import { DEFAULT_PROCESS_METRICS, type MetricDefinition, METRICS } from '../src/metrics/catalog.js';
import { renderChart, type RenderedChart } from './support/helm/render.js';
import { type Family, scrape } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The chart's monitoring (issue 32, docs/adr/0048-chart-monitoring.md): the metrics port and its
 * Services, the scrape annotations, the optional ServiceMonitor, PrometheusRule and Grafana
 * dashboard; every PromQL expression of the alerts and the dashboard parsed with Prometheus's own
 * lezer grammar and each metric it names found in the catalog and in a real scrape of kiln; and,
 * where promtool is installed (`make promtool`), `promtool check rules` and `promtool test rules`.
 */
const ROOT = join(__dirname, '..');
const CHART = join(ROOT, 'charts', 'kiln');
const DATABASE = { database: { existingSecret: 'kiln-database' } };
const ALL_ON = {
  ...DATABASE,
  metrics: {
    serviceMonitor: { enabled: true, labels: { release: 'prom' }, interval: '15s' },
    prometheusRule: { enabled: true, labels: { release: 'prom' }, alertLabels: { team: 'ci' } },
    grafanaDashboard: { enabled: true, namespace: 'monitoring', annotations: { folder: 'CI' } },
  },
};

type Obj = Record<string, any>;

const render = (values: Obj = DATABASE): RenderedChart =>
  renderChart({ chartDir: CHART, releaseName: 'kiln', namespace: 'kiln', values });
const objects = (chart: RenderedChart): Obj[] => chart.documents.map((d) => d.object as Obj);
const ofKind = (chart: RenderedChart, kind: string): Obj[] =>
  objects(chart).filter((o) => o.kind === kind);
const deployments = (chart: RenderedChart): Obj[] => ofKind(chart, 'Deployment');
const container = (deployment: Obj): Obj => deployment.spec.template.spec.containers[0];
const envValue = (deployment: Obj, name: string): unknown =>
  (container(deployment).env as Obj[]).find((e) => e.name === name)?.value;

/** The alert rules of the rendered PrometheusRule. */
const alertsOf = (chart: RenderedChart): Obj[] =>
  ofKind(chart, 'PrometheusRule').flatMap((r) => (r.spec.groups as Obj[]).flatMap((g) => g.rules));

/** Every query of the dashboard: each panel's targets and each query variable. */
function dashboardQueries(dashboard: Obj): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  const walk = (panels: Obj[]): void => {
    for (const panel of panels) {
      for (const target of (panel.targets ?? []) as Obj[])
        out.push({ where: `panel "${panel.title}" ${target.refId}`, expr: target.expr });
      walk((panel.panels ?? []) as Obj[]);
    }
  };
  walk(dashboard.panels as Obj[]);
  return out;
}

/**
 * Grafana replaces its interval variables before Prometheus sees a query; so does this test (a
 * range must be a duration to parse). Variables inside label values stay as they are.
 */
const interpolated = (expr: string): string =>
  expr.replace(/\$__(rate_interval|interval|range)/g, '5m');

/**
 * The metric names a PromQL expression selects, read from the syntax tree of Prometheus's own
 * grammar: the identifier of each vector selector, or its `__name__` matcher. Throws on a syntax
 * error and on a selector that names no metric (it could match anything).
 */
function metricNames(expr: string): string[] {
  const tree = parser.parse(expr);
  const names: string[] = [];
  const cursor = tree.cursor();
  do {
    if (cursor.type.isError) {
      throw new Error(`does not parse at ${cursor.from}: ${expr}`);
    }
    if (cursor.name !== 'VectorSelector') continue;
    const selector = cursor.node;
    const identifier = selector.getChild('Identifier');
    const byName = selector
      .getChild('LabelMatchers')
      ?.getChildren('UnquotedLabelMatcher')
      .find((m) => expr.slice(m.from, m.to).startsWith('__name__'));
    if (identifier !== null) names.push(expr.slice(identifier.from, identifier.to));
    else if (byName !== undefined) {
      const value = byName.getChild('StringLiteral');
      names.push(JSON.parse(expr.slice(value!.from, value!.to)) as string);
    } else throw new Error(`a selector without a metric name: ${expr}`);
  } while (cursor.next());
  return names;
}

/** Names as the catalog lists them: a histogram's series by its _bucket, _sum and _count. */
const CATALOG = new Set<string>([
  ...DEFAULT_PROCESS_METRICS,
  ...Object.entries(METRICS as Record<string, MetricDefinition>).flatMap(([name, d]) =>
    d.type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name],
  ),
]);

/** The family of a series name in a scrape (a histogram's by its suffixes). */
function scraped(families: Map<string, Family>, name: string): boolean {
  if (families.has(name)) return true;
  const suffix = /_(bucket|sum|count)$/.exec(name);
  const family = suffix ? families.get(name.slice(0, suffix.index)) : undefined;
  return family?.type === 'histogram';
}

/** What is wrong with the metric names of these expressions: empty when nothing. */
function problems(
  queries: Array<{ where: string; expr: string }>,
  families: Map<string, Family>,
): string[] {
  return queries.flatMap(({ where, expr }) => {
    let names: string[];
    try {
      names = metricNames(interpolated(expr));
    } catch (error) {
      return [`${where}: ${(error as Error).message}`];
    }
    if (names.length === 0) return [`${where}: names no metric`];
    return names.flatMap((name) => [
      ...(CATALOG.has(name) ? [] : [`${where}: ${name} is not in src/metrics/catalog.ts`]),
      ...(scraped(families, name) ? [] : [`${where}: ${name} is not in kiln's /metrics`]),
    ]);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** promtool on the PATH, or where `make promtool` puts it. */
function findPromtool(): string | undefined {
  const candidates = [
    ...(process.env['PATH'] ?? '').split(delimiter).map((dir) => join(dir, 'promtool')),
    join(ROOT, '.tools', 'prometheus', 'promtool'),
  ];
  return candidates.find((path) => existsSync(path));
}
const PROMTOOL = findPromtool();

describe('the Helm chart’s monitoring (metrics.*)', () => {
  it('by default publishes /metrics on its own port with scrape annotations, and no ServiceMonitor, PrometheusRule or dashboard', () => {
    const chart = render();
    expect(deployments(chart).map((d) => d.metadata.name)).toEqual(['kiln-api', 'kiln-operator']);
    for (const deployment of deployments(chart)) {
      expect(envValue(deployment, 'KILN_METRICS_PORT')).toBe('9090');
      expect(envValue(deployment, 'KILN_METRICS_TENANT_LABELS')).toBe('false');
      expect(container(deployment).ports).toEqual([
        { name: 'http', containerPort: 8080, protocol: 'TCP' },
        { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
      ]);
      expect(deployment.spec.template.metadata.annotations).toEqual({
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': '9090',
        'prometheus.io/path': '/metrics',
      });
    }
    const services = ofKind(chart, 'Service').map((s) => ({
      name: s.metadata.name,
      clusterIP: s.spec.clusterIP,
      component: s.spec.selector['app.kubernetes.io/component'],
      ports: (s.spec.ports as Obj[]).map((p) => `${p.name}:${p.port}->${p.targetPort}`),
    }));
    services.sort((a, b) => String(a.name).localeCompare(String(b.name)));
    expect(services).toEqual([
      { name: 'kiln', clusterIP: undefined, component: 'api', ports: ['http:80->http'] },
      {
        name: 'kiln-api-metrics',
        clusterIP: 'None',
        component: 'api',
        ports: ['metrics:9090->metrics'],
      },
      {
        name: 'kiln-operator-metrics',
        clusterIP: 'None',
        component: 'operator',
        ports: ['metrics:9090->metrics'],
      },
    ]);
    expect(
      objects(chart).filter((o) => String(o.apiVersion).startsWith('monitoring.coreos.com')),
    ).toEqual([]);
    expect(ofKind(chart, 'ConfigMap').map((c) => c.metadata.name)).not.toContain('kiln-dashboard');
  });

  it('renders the ServiceMonitor, the PrometheusRule and the dashboard ConfigMap when asked, with their labels and namespaces', () => {
    const chart = render(ALL_ON);
    const [monitor, ...moreMonitors] = ofKind(chart, 'ServiceMonitor');
    expect(moreMonitors).toEqual([]);
    expect(monitor!.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor!.metadata).toMatchObject({
      name: 'kiln',
      namespace: 'kiln',
      labels: { release: 'prom' },
    });
    expect(monitor!.spec.endpoints).toEqual([
      { port: 'metrics', path: '/metrics', interval: '15s', scrapeTimeout: '10s' },
    ]);
    // It selects exactly the two metrics Services, in the release namespace.
    const selected = ofKind(chart, 'Service').filter((s) =>
      Object.entries(monitor!.spec.selector.matchLabels as Obj).every(
        ([key, value]) => s.metadata.labels[key] === value,
      ),
    );
    expect(selected.map((s) => s.metadata.name)).toEqual([
      'kiln-api-metrics',
      'kiln-operator-metrics',
    ]);
    expect(monitor!.spec.namespaceSelector).toEqual({ matchNames: ['kiln'] });

    const [rule, ...moreRules] = ofKind(chart, 'PrometheusRule');
    expect(moreRules).toEqual([]);
    expect(rule!.metadata).toMatchObject({
      name: 'kiln',
      namespace: 'kiln',
      labels: { release: 'prom' },
    });
    const alerts = alertsOf(chart);
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        'KilnOperatorNoLeader',
        'KilnReconcileErrorsRising',
        'KilnBuildsFailingPlatform',
        'KilnLogAppendSlow',
        'KilnBuildsWaitingTooLong',
      ]),
    );
    for (const alert of alerts) {
      expect(alert.labels).toEqual({
        severity: expect.stringMatching(/^(critical|warning)$/),
        team: 'ci',
      });
      expect(Object.keys(alert.annotations).sort()).toEqual([
        'description',
        'runbook_url',
        'summary',
      ]);
      expect(alert.expr).toContain('namespace="kiln"');
    }
    const noLeader = alerts.find((a) => a.alert === 'KilnOperatorNoLeader')!;
    expect(noLeader).toMatchObject({ for: '5m', labels: { severity: 'critical' } });
    expect(noLeader.expr).toMatch(
      /max\(kiln_operator_leader\{[^}]*\}\) < 1\)\s+or absent\(kiln_operator_leader/,
    );

    const dashboards = ofKind(chart, 'ConfigMap').filter(
      (c) => c.metadata.name === 'kiln-dashboard',
    );
    expect(dashboards).toHaveLength(1);
    expect(dashboards[0]!.metadata).toMatchObject({
      namespace: 'monitoring',
      labels: { grafana_dashboard: '1' },
      annotations: { folder: 'CI' },
    });
    expect(JSON.parse(dashboards[0]!.data['kiln.json'] as string)).toEqual(
      JSON.parse(readFileSync(join(CHART, 'dashboards', 'kiln.json'), 'utf8')),
    );
    // The sidecar's label is configurable.
    const relabelled = render({
      ...DATABASE,
      metrics: { grafanaDashboard: { enabled: true, labelKey: 'dashboards', labelValue: 'kiln' } },
    });
    const configMap = ofKind(relabelled, 'ConfigMap').find(
      (c) => c.metadata.name === 'kiln-dashboard',
    );
    expect(configMap!.metadata.labels).toMatchObject({ dashboards: 'kiln' });
    expect(configMap!.metadata.labels).not.toHaveProperty('grafana_dashboard');
  });

  it('puts the thresholds and the selector it is given into the alerts', () => {
    const chart = render({
      ...DATABASE,
      metrics: {
        prometheusRule: {
          enabled: true,
          selector: 'job="kiln"',
          thresholds: { waitingOlderThanSeconds: 7200, appendLatencyP99Seconds: 2 },
        },
      },
    });
    const expr = (name: string): string => alertsOf(chart).find((a) => a.alert === name)!.expr;
    expect(expr('KilnBuildsWaitingTooLong')).toBe(
      'max(kiln_builds_waiting_oldest_seconds{job="kiln"}) > 7200',
    );
    expect(expr('KilnLogAppendSlow')).toMatch(/\{job="kiln"\}\[10m\]\)\)\)\s+> 2$/);
    expect(expr('KilnReconcileErrorsRising')).toContain('{job="kiln",result="error"}');
  });

  it('never routes the Ingress to the metrics port: it reaches the main Service, which has none', () => {
    const chart = render({ ...ALL_ON, ingress: { enabled: true, host: 'kiln.example.com' } });
    const [ingress] = ofKind(chart, 'Ingress');
    const backends = (ingress!.spec.rules as Obj[]).flatMap((r) =>
      (r.http.paths as Obj[]).map((p) => p.backend.service),
    );
    expect(backends).toEqual([{ name: 'kiln', port: { name: 'http' } }]);
    const routed = ofKind(chart, 'Service').find((s) => s.metadata.name === 'kiln')!;
    expect((routed.spec.ports as Obj[]).map((p) => [p.name, p.targetPort])).toEqual([
      ['http', 'http'],
    ]);
    expect(ofKind(chart, 'HTTPRoute')).toEqual([]);
    // The build pods' NetworkPolicy still lets them reach the API's main port only.
    for (const policy of ofKind(chart, 'NetworkPolicy')) {
      const toApi = (policy.spec.egress as Obj[]).filter((e) =>
        (e.to as Obj[]).some(
          (t) => t.podSelector?.matchLabels?.['app.kubernetes.io/component'] === 'api',
        ),
      );
      expect(toApi.flatMap((e) => (e.ports as Obj[]).map((p) => p.port))).toEqual([8080]);
    }
  });

  it('with metrics.enabled false publishes nothing, and /metrics still stays off the main port', () => {
    const chart = render({ ...ALL_ON, metrics: { ...ALL_ON.metrics, enabled: false } });
    for (const deployment of deployments(chart)) {
      expect(envValue(deployment, 'KILN_METRICS_PORT')).toBe('9090');
      expect((container(deployment).ports as Obj[]).map((p) => p.name)).toEqual(['http']);
      expect(deployment.spec.template.metadata.annotations).toBeUndefined();
    }
    expect(ofKind(chart, 'Service').map((s) => s.metadata.name)).toEqual(['kiln']);
    expect(ofKind(chart, 'ServiceMonitor')).toEqual([]);
    expect(ofKind(chart, 'PrometheusRule')).toEqual([]);
    expect(ofKind(chart, 'ConfigMap').map((c) => c.metadata.name)).not.toContain('kiln-dashboard');
  });

  it('takes the port, the tenant labels and pod annotations it is given; the user’s annotations win', () => {
    const chart = render({
      ...DATABASE,
      metrics: { port: 9100, tenantLabels: true },
      api: { podAnnotations: { 'prometheus.io/scrape': 'false', team: 'ci' } },
    });
    const [api, operator] = deployments(chart);
    for (const deployment of [api!, operator!]) {
      expect(envValue(deployment, 'KILN_METRICS_PORT')).toBe('9100');
      expect(envValue(deployment, 'KILN_METRICS_TENANT_LABELS')).toBe('true');
      expect(container(deployment).ports[1]).toEqual({
        name: 'metrics',
        containerPort: 9100,
        protocol: 'TCP',
      });
    }
    expect(api!.spec.template.metadata.annotations).toEqual({
      'prometheus.io/scrape': 'false',
      'prometheus.io/port': '9100',
      'prometheus.io/path': '/metrics',
      team: 'ci',
    });
    expect(operator!.spec.template.metadata.annotations['prometheus.io/port']).toBe('9100');
    const noAnnotations = render({ ...DATABASE, metrics: { scrapeAnnotations: false } });
    for (const deployment of deployments(noAnnotations))
      expect(deployment.spec.template.metadata.annotations).toBeUndefined();
    // The main port cannot be the metrics port.
    expect(() => render({ ...DATABASE, metrics: { port: 8080 } })).toThrow(
      /'\/metrics\/port': 'not' failed/,
    );
  });

  describe('every metric the alerts and the dashboard name', () => {
    let kiln: TestApp;
    let families: Map<string, Family>;
    const chart = render(ALL_ON);
    const alertQueries = alertsOf(chart).map((a) => ({
      where: `alert ${a.alert}`,
      expr: a.expr as string,
    }));
    const dashboard = JSON.parse(
      readFileSync(join(CHART, 'dashboards', 'kiln.json'), 'utf8'),
    ) as Obj;
    const panelQueries = dashboardQueries(dashboard);

    beforeAll(async () => {
      // kiln as the chart runs it: /metrics on its own port; role all serves every catalog metric.
      const port = await freePort();
      kiln = await startTestApp({ env: { KILN_ROLE: 'all', KILN_METRICS_PORT: String(port) } });
      families = await scrape(`http://127.0.0.1:${port}/metrics`);
    });
    afterAll(() => kiln.close());

    it('parses with the PromQL grammar and is in the catalog and in a scrape of kiln', () => {
      expect(alertQueries.length).toBeGreaterThanOrEqual(8);
      expect(panelQueries.length).toBeGreaterThan(30);
      expect(problems([...alertQueries, ...panelQueries], families)).toEqual([]);
      // The dashboard's variable reads a label of a metric kiln exports too.
      const variables = (dashboard.templating.list as Obj[]).filter((v) => v.type === 'query');
      for (const variable of variables) {
        const metric = /^label_values\((\w+),\s*\w+\)$/.exec(variable.definition as string)?.[1];
        expect({
          variable: variable.name,
          metric,
          known: CATALOG.has(metric ?? '') && scraped(families, metric!),
        }).toEqual({
          variable: variable.name,
          metric: expect.any(String),
          known: true,
        });
      }
      expect(
        (dashboard.templating.list as Obj[]).find((v) => v.type === 'datasource'),
      ).toMatchObject({
        name: 'datasource',
        query: 'prometheus',
      });
    });

    it('covers every metric of the catalog in the dashboard', () => {
      const named = new Set(
        panelQueries
          .flatMap(({ expr }) => metricNames(interpolated(expr)))
          .map((n) => n.replace(/_(bucket|sum|count)$/, '')),
      );
      const missing = [...Object.keys(METRICS), ...DEFAULT_PROCESS_METRICS].filter(
        (n) => !named.has(n),
      );
      expect(missing).toEqual([]);
    });

    it('catches a misspelled name, a name kiln does not export, a selector without a name and a syntax error', () => {
      const broken = [
        { where: 'typo', expr: 'sum(rate(kiln_operator_reconcile_total{result="error"}[5m]))' },
        { where: 'foreign', expr: 'rate(http_requests_total[$__rate_interval])' },
        { where: 'nameless', expr: 'sum({namespace="kiln"})' },
        { where: 'by name', expr: 'sum({__name__="kiln_builds_runing"})' },
        { where: 'syntax', expr: 'sum(rate(kiln_builds_started_total[5m])' },
        // A histogram's series are named by its suffixes, not by the family alone.
        { where: 'histogram', expr: 'rate(kiln_log_append_duration_seconds[5m])' },
      ];
      expect(problems(broken, families)).toEqual([
        'typo: kiln_operator_reconcile_total is not in src/metrics/catalog.ts',
        "typo: kiln_operator_reconcile_total is not in kiln's /metrics",
        'foreign: http_requests_total is not in src/metrics/catalog.ts',
        "foreign: http_requests_total is not in kiln's /metrics",
        'nameless: a selector without a metric name: sum({namespace="kiln"})',
        'by name: kiln_builds_runing is not in src/metrics/catalog.ts',
        "by name: kiln_builds_runing is not in kiln's /metrics",
        expect.stringMatching(/^syntax: does not parse at \d+/),
        'histogram: kiln_log_append_duration_seconds is not in src/metrics/catalog.ts',
      ]);
      // The same check over the chart's real alert with one name misspelled.
      const misspelled = alertQueries.map((q) =>
        q.where === 'alert KilnOperatorNoLeader'
          ? {
              ...q,
              expr: q.expr.replace('absent(kiln_operator_leader', 'absent(kiln_operator_leaders'),
            }
          : q,
      );
      expect(problems(misspelled, families)).toEqual([
        'alert KilnOperatorNoLeader: kiln_operator_leaders is not in src/metrics/catalog.ts',
        "alert KilnOperatorNoLeader: kiln_operator_leaders is not in kiln's /metrics",
      ]);
    });
  });

  it('points every alert at its runbook in docs/operations.md, and describes every dashboard panel there', () => {
    const operations = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    const anchors = new Set(
      [...operations.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    const section = (title: string): string => {
      const start = operations.indexOf(`\n## ${title}\n`);
      expect(start).toBeGreaterThan(0);
      const end = operations.indexOf('\n## ', start + 1);
      return operations.slice(start, end < 0 ? undefined : end);
    };
    const alerts = section('Alerts');
    for (const alert of alertsOf(render(ALL_ON))) {
      const anchor = alert.alert.toLowerCase();
      expect(alert.annotations.runbook_url).toBe(
        `https://kiln.example.com/docs/operations.md#${anchor}`,
      );
      expect({
        alert: alert.alert,
        documented: anchors.has(anchor) && alerts.includes(`### ${alert.alert}`),
      }).toEqual({
        alert: alert.alert,
        documented: true,
      });
    }
    const panels = section('Dashboard');
    const dashboard = JSON.parse(
      readFileSync(join(CHART, 'dashboards', 'kiln.json'), 'utf8'),
    ) as Obj;
    for (const panel of dashboard.panels as Obj[])
      expect({ panel: panel.title, documented: panels.includes(`**${panel.title}**`) }).toEqual({
        panel: panel.title,
        documented: true,
      });
    // Both sections stand between Metrics and Retention.
    const order = ['## Metrics', '## Dashboard', '## Alerts', '## Retention'].map((h) =>
      operations.indexOf(`\n${h}\n`),
    );
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(order.every((at) => at > 0)).toBe(true);
  });

  describe('promtool', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-promtool-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const rulesFile = (): string => {
      const file = join(dir, 'rules.yaml');
      writeFileSync(
        file,
        stringify({ groups: ofKind(render(ALL_ON), 'PrometheusRule')[0]!.spec.groups }),
      );
      return file;
    };
    const promtool = (...args: string[]): { code: number | null; out: string } => {
      const run = spawnSync(PROMTOOL!, args, { cwd: dir, encoding: 'utf8' });
      return { code: run.status, out: `${run.stdout}${run.stderr}` };
    };
    if (PROMTOOL === undefined) {
      // Not a Debian machine, or `make promtool` not run: the parser check above still ran.
      it.skip('promtool is not installed (make promtool)', () => undefined);
      return;
    }

    it('check rules accepts the rendered rule groups, and refuses a broken one', () => {
      const file = rulesFile();
      const ok = promtool('check', 'rules', file);
      expect(ok).toEqual({ code: 0, out: expect.stringMatching(/SUCCESS: \d+ rules found/) });
      writeFileSync(
        file,
        readFileSync(file, 'utf8').replace('kiln_operator_leader{', 'kiln_operator_leader{{'),
      );
      expect(promtool('check', 'rules', file).code).not.toBe(0);
    });

    it('test rules: each alert’s expression fires on the series it is about and stays quiet on healthy ones', () => {
      rulesFile();
      const expressions = new Map(
        alertsOf(render(ALL_ON)).map((a) => [a.alert as string, a.expr as string]),
      );
      const ns = 'namespace="kiln"';
      /** Series, the time to evaluate at, and whether the alert's expression returns anything. */
      const cases: Array<[string, string, Array<[string, string]>, boolean]> = [
        [
          'KilnOperatorNoLeader',
          '10m',
          [
            [`kiln_operator_leader{${ns},pod="a"}`, '0x20'],
            [`kiln_operator_leader{${ns},pod="b"}`, '0x20'],
            ['kiln_operator_leader{namespace="other",pod="c"}', '1x20'],
          ],
          true,
        ],
        ['KilnOperatorNoLeader', '10m', [[`kiln_builds_running{${ns}}`, '0x20']], true],
        [
          'KilnOperatorNoLeader',
          '10m',
          [
            [`kiln_operator_leader{${ns},pod="a"}`, '0x20'],
            [`kiln_operator_leader{${ns},pod="b"}`, '1x20'],
          ],
          false,
        ],
        [
          'KilnReconcileErrorsRising',
          '30m',
          [
            [`kiln_operator_reconciles_total{${ns},controller="build",result="error"}`, '0+3x60'],
            [`kiln_operator_reconciles_total{${ns},controller="build",result="success"}`, '0+7x60'],
          ],
          true,
        ],
        [
          'KilnReconcileErrorsRising',
          '30m',
          [
            [`kiln_operator_reconciles_total{${ns},controller="build",result="error"}`, '0x60'],
            [
              `kiln_operator_reconciles_total{${ns},controller="build",result="success"}`,
              '0+10x60',
            ],
          ],
          false,
        ],
        [
          'KilnBuildsFailingPlatform',
          '60m',
          [
            [
              `kiln_builds_finished_total{${ns},method="kaniko",result="failed",reason="ImagePullFailed",class="platform"}`,
              '0+1x70',
            ],
          ],
          true,
        ],
        [
          'KilnBuildsFailingPlatform',
          '60m',
          [
            [
              `kiln_builds_finished_total{${ns},method="kaniko",result="failed",reason="BuildFailed",class="user"}`,
              '0+1x70',
            ],
          ],
          false,
        ],
        [
          'KilnLogAppendSlow',
          '30m',
          [
            [`kiln_log_append_duration_seconds_bucket{${ns},le="0.25"}`, '0x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="0.5"}`, '0x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="1"}`, '0+10x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="+Inf"}`, '0+10x60'],
          ],
          true,
        ],
        [
          'KilnLogAppendSlow',
          '30m',
          [
            [`kiln_log_append_duration_seconds_bucket{${ns},le="0.25"}`, '0x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="0.5"}`, '0+10x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="1"}`, '0+10x60'],
            [`kiln_log_append_duration_seconds_bucket{${ns},le="+Inf"}`, '0+10x60'],
          ],
          false,
        ],
        [
          'KilnBuildsWaitingTooLong',
          '10m',
          [[`kiln_builds_waiting_oldest_seconds{${ns},pod="a"}`, '3600x20']],
          true,
        ],
        [
          'KilnBuildsWaitingTooLong',
          '10m',
          [[`kiln_builds_waiting_oldest_seconds{${ns},pod="a"}`, '60x20']],
          false,
        ],
        [
          'KilnHttpErrors',
          '30m',
          [
            [
              `kiln_http_requests_total{${ns},method="GET",route="/api/v1/builds",status_class="5xx"}`,
              '0+10x60',
            ],
            [
              `kiln_http_requests_total{${ns},method="GET",route="/api/v1/builds",status_class="2xx"}`,
              '0+90x60',
            ],
          ],
          true,
        ],
        [
          'KilnHttpErrors',
          '30m',
          [
            [
              `kiln_http_requests_total{${ns},method="GET",route="/api/v1/builds",status_class="5xx"}`,
              '0+1x60',
            ],
            [
              `kiln_http_requests_total{${ns},method="GET",route="/api/v1/builds",status_class="2xx"}`,
              '0+99x60',
            ],
          ],
          false,
        ],
        [
          'KilnDatabasePoolExhausted',
          '10m',
          [[`kiln_db_pool_connections{${ns},pod="a",state="waiting"}`, '3x20']],
          true,
        ],
        [
          'KilnDatabasePoolExhausted',
          '10m',
          [
            [`kiln_db_pool_connections{${ns},pod="a",state="waiting"}`, '0x20'],
            [`kiln_db_pool_connections{${ns},pod="a",state="in_use"}`, '10x20'],
          ],
          false,
        ],
        [
          'KilnLogLinesLost',
          '30m',
          [[`kiln_log_lines_dropped_total{${ns},cause="database_unavailable"}`, '0+5x60']],
          true,
        ],
        [
          'KilnLogLinesLost',
          '30m',
          [
            [`kiln_log_lines_dropped_total{${ns},cause="limit"}`, '0+5x60'],
            [`kiln_log_lines_dropped_total{${ns},cause="drain_deadline"}`, '0x60'],
          ],
          false,
        ],
      ];
      expect(new Set(cases.map(([alert]) => alert))).toEqual(new Set(expressions.keys()));
      const tests = cases.map(([alert, at, series, fires]) => ({
        interval: '1m',
        input_series: series.map(([name, values]) => ({ series: name, values })),
        promql_expr_test: [
          {
            expr: `count(${expressions.get(alert)!})`,
            eval_time: at,
            exp_samples: fires ? [{ labels: '{}', value: 1 }] : [],
          },
        ],
      }));
      writeFileSync(join(dir, 'tests.yaml'), stringify({ rule_files: ['rules.yaml'], tests }));
      const run = promtool('test', 'rules', 'tests.yaml');
      expect(run).toEqual({ code: 0, out: expect.stringContaining('SUCCESS') });
      // And the test does fail when a case is wrong.
      tests[0]!.promql_expr_test[0]!.exp_samples = [];
      writeFileSync(join(dir, 'tests.yaml'), stringify({ rule_files: ['rules.yaml'], tests }));
      expect(promtool('test', 'rules', 'tests.yaml').code).not.toBe(0);
    });
  });
});
