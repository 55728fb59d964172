import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import {
  type CounterName,
  type GaugeName,
  type HistogramName,
  type MetricDefinition,
  type MetricName,
  METRICS,
} from './catalog.js';

/** Label values by name. `tenant` is kept only where the catalog allows it and it is turned on. */
export type MetricLabels = Readonly<Record<string, string | number>>;

/** Sets a scrape-time gauge's values: called with each label set and its value. */
export type GaugeCollector = (set: (labels: MetricLabels, value: number) => void) => Promise<void>;

export interface MetricsOptions {
  /** KILN_METRICS_TENANT_LABELS: per-tenant metrics carry a `tenant` label. */
  readonly tenantLabels: boolean;
}

type AnyMetric = Counter<string> | Gauge<string> | Histogram<string>;

/**
 * kiln's one registry: every metric of the catalog, created at start, and the process defaults.
 * Features record through `inc`, `set`, `observe`, naming a catalog entry; labels outside the
 * entry's list are refused (a bug, thrown at once in tests), so no call adds an unbounded label.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly metrics = new Map<MetricName, AnyMetric>();
  private readonly collectors = new Map<GaugeName, GaugeCollector[]>();

  constructor(private readonly options: MetricsOptions) {
    for (const [name, definition] of Object.entries(METRICS) as Array<
      [MetricName, MetricDefinition]
    >) {
      this.metrics.set(name, this.create(name, definition));
    }
    collectDefaultMetrics({ register: this.registry });
  }

  inc(name: CounterName, labels: MetricLabels = {}, value = 1): void {
    (this.metrics.get(name) as Counter<string>).inc(this.labelsOf(name, labels), value);
  }

  set(name: GaugeName, labels: MetricLabels, value: number): void {
    (this.metrics.get(name) as Gauge<string>).set(this.labelsOf(name, labels), value);
  }

  /** Adds (or with a negative delta, takes away) from a gauge kept in memory. */
  add(name: GaugeName, labels: MetricLabels, delta: number): void {
    (this.metrics.get(name) as Gauge<string>).inc(this.labelsOf(name, labels), delta);
  }

  observe(name: HistogramName, labels: MetricLabels, value: number): void {
    (this.metrics.get(name) as Histogram<string>).observe(this.labelsOf(name, labels), value);
  }

  /** Starts a timer; the function it returns observes the seconds since, with these labels. */
  startTimer(name: HistogramName, labels: MetricLabels = {}): (more?: MetricLabels) => number {
    const started = process.hrtime.bigint();
    return (more = {}) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.observe(name, { ...labels, ...more }, seconds);
      return seconds;
    };
  }

  /**
   * A gauge whose values are read when Prometheus scrapes (from the database, say): each scrape
   * resets it and runs its collectors. A collector that fails leaves the gauge empty for that
   * scrape rather than failing the whole scrape.
   */
  collectWith(name: GaugeName, collector: GaugeCollector): () => void {
    const list = this.collectors.get(name) ?? [];
    list.push(collector);
    this.collectors.set(name, list);
    return () => {
      const at = list.indexOf(collector);
      if (at >= 0) list.splice(at, 1);
    };
  }

  /** The Prometheus text exposition of every metric. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private create(name: MetricName, definition: MetricDefinition): AnyMetric {
    const labelNames = [...definition.labels];
    if (definition.perTenant === true && this.options.tenantLabels) labelNames.push('tenant');
    const common = { name, help: definition.help, labelNames, registers: [this.registry] };
    switch (definition.type) {
      case 'counter':
        return new Counter(common);
      case 'histogram':
        return new Histogram({ ...common, buckets: [...(definition.buckets ?? [])] });
      case 'gauge': {
        const collectors = (): GaugeCollector[] => this.collectors.get(name as GaugeName) ?? [];
        const labelsOf = (labels: MetricLabels) => this.labelsOf(name, labels);
        return new Gauge({
          ...common,
          async collect() {
            const list = collectors();
            if (list.length === 0) return;
            this.reset();
            for (const collector of list) {
              await collector((labels, value) => this.set(labelsOf(labels), value)).catch(() =>
                this.reset(),
              );
            }
          },
        });
      }
    }
  }

  private labelsOf(name: MetricName, labels: MetricLabels): Record<string, string | number> {
    const definition: MetricDefinition = METRICS[name];
    const out: Record<string, string | number> = {};
    for (const [key, value] of Object.entries(labels)) {
      if (key === 'tenant') {
        if (definition.perTenant === true && this.options.tenantLabels) out.tenant = value;
        continue;
      }
      if (!definition.labels.includes(key)) {
        throw new Error(`metric ${name} has no label ${key}`);
      }
      out[key] = value;
    }
    return out;
  }
}
