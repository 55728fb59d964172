import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DEFAULT_PROCESS_METRICS,
  type MetricDefinition,
  type MetricName,
  METRICS,
} from '../src/metrics/catalog.js';
import { type Family, scrape } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The catalog (src/metrics/catalog.ts) is what kiln exports: every entry in a real scrape of each
 * role that serves the API, with its help and type; names and labels by Prometheus's conventions;
 * and docs/operations.md's table says exactly the catalog.
 */
const CATALOG = Object.entries(METRICS) as Array<[MetricName, MetricDefinition]>;

describe('the metrics catalog', () => {
  describe.each(['all', 'api'])('a scrape of role %s', (role) => {
    let kiln: TestApp;
    let families: Map<string, Family>;

    beforeAll(async () => {
      kiln = await startTestApp({ env: { KILN_ROLE: role } });
      families = await scrape(`${kiln.baseUrl}/metrics`);
    });
    afterAll(() => kiln.close());

    it.each(CATALOG.map(([name, definition]) => [name, definition.type]))(
      'has %s with non-empty help and type %s',
      (name, type) => {
        const family = families.get(name);
        expect(family?.type).toBe(type);
        expect(family?.help.trim()).not.toBe('');
        expect(family?.help).toBe(METRICS[name].help);
      },
    );

    it("has prom-client's process metrics", () => {
      for (const name of DEFAULT_PROCESS_METRICS) expect(families.has(name)).toBe(true);
    });

    it('exports no kiln_ family the catalog does not list', () => {
      const kilnFamilies = [...families.keys()].filter((name) => name.startsWith('kiln_'));
      expect(kilnFamilies.sort()).toEqual(CATALOG.map(([name]) => name).sort());
    });
  });

  it('names metrics by convention: kiln_ prefix, counters in _total, durations in _seconds, no id-like label', () => {
    const problems: string[] = [];
    for (const [name, definition] of CATALOG) {
      if (!/^kiln_[a-z][a-z0-9_]*$/.test(name)) problems.push(`${name}: not kiln_snake_case`);
      if ((definition.type === 'counter') !== name.endsWith('_total'))
        problems.push(`${name}: _total is for counters, and every counter`);
      if (/duration|latency|wait_seconds|_time/.test(name) && !name.endsWith('_seconds'))
        problems.push(`${name}: a time is in _seconds`);
      if (definition.type === 'histogram' && (definition.buckets ?? []).length === 0)
        problems.push(`${name}: a histogram without buckets`);
      for (const label of definition.labels) {
        if (
          /^(id|build|build_id|user|user_id|path|tenant|tenant_id|project|project_id)$/.test(label)
        )
          problems.push(`${name}: label ${label} is unbounded`);
        if (!/^[a-z][a-z_]*$/.test(label)) problems.push(`${name}: label ${label} not snake_case`);
      }
      if (definition.help.trim().length < 10) problems.push(`${name}: help too short`);
    }
    expect(problems).toEqual([]);
  });

  it("docs/operations.md's metrics table lists exactly the catalog: name, type, labels", () => {
    const rows = metricsTable(readFileSync(join(__dirname, '..', 'docs', 'operations.md'), 'utf8'));
    const documented = rows.map((row) => ({
      name: row.name,
      type: row.type,
      labels: row.labels,
      perTenant: row.perTenant,
    }));
    const catalog = CATALOG.map(([name, definition]) => ({
      name,
      type: definition.type,
      labels: [...definition.labels],
      perTenant: definition.perTenant === true,
    }));
    expect(documented).toEqual(catalog);
    for (const row of rows) expect(row.meaning.length).toBeGreaterThan(10);
  });
});

interface TableRow {
  readonly name: string;
  readonly type: string;
  readonly labels: string[];
  readonly perTenant: boolean;
  readonly meaning: string;
}

/**
 * The table under "## Metrics": a header `| Name | Type | Labels | Meaning |`, a delimiter row,
 * then one row per metric. Labels are backticked names, `—` for none; `tenant` (opt-in) marks a
 * per-tenant metric.
 */
function metricsTable(markdown: string): TableRow[] {
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Metrics\n'));
  if (section === undefined) throw new Error('no "## Metrics" section');
  const lines = section.split('\n').filter((line) => line.startsWith('|'));
  const cells = (line: string) =>
    line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim());
  expect(cells(lines[0] ?? '')).toEqual(['Name', 'Type', 'Labels', 'Meaning']);
  expect(cells(lines[1] ?? '').every((cell) => /^:?-{3,}:?$/.test(cell))).toBe(true);
  return lines.slice(2).map((line) => {
    const [name = '', type = '', labels = '', meaning = ''] = cells(line);
    const names = [...labels.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
    const perTenant = /`tenant` \(opt-in\)/.test(labels);
    if (names.length === 0 && labels !== '—') throw new Error(`labels cell ${labels} unreadable`);
    return {
      name: /^`([^`]+)`$/.exec(name)?.[1] ?? name,
      type,
      labels: names.filter((label) => !(perTenant && label === 'tenant')),
      perTenant,
      meaning,
    };
  });
}
