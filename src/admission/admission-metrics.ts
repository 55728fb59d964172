import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { KilnConfig } from '../config/config.js';
import { Metrics } from '../metrics/metrics.js';
import { AdmissionStore, type QueueGaugeRow } from './admission.repository.js';

/**
 * The queue's gauges, read from build_admissions when Prometheus scrapes: builds waiting by
 * reason, the longest wait, builds running. The three share one statement per scrape. Every
 * replica reads the same table, so every replica reports the same values (dashboards take max()).
 */
@Injectable()
export class AdmissionMetrics implements OnModuleInit, OnModuleDestroy {
  private reading: Promise<QueueGaugeRow[]> | undefined;
  private readonly unregister: Array<() => void> = [];

  constructor(
    private readonly store: AdmissionStore,
    private readonly metrics: Metrics,
    private readonly config: KilnConfig,
  ) {}

  onModuleInit(): void {
    this.unregister.push(
      this.metrics.collectWith('kiln_builds_waiting', async (set) => {
        const waiting = (await this.rows()).filter((row) => row.reason !== null);
        for (const [labels, builds] of summed(waiting, (row) => ({ reason: row.reason! })))
          set(labels, builds);
      }),
      this.metrics.collectWith('kiln_builds_waiting_oldest_seconds', async (set) => {
        let oldest = 0;
        for (const row of await this.rows()) oldest = Math.max(oldest, row.oldestSeconds ?? 0);
        set({}, oldest);
      }),
      this.metrics.collectWith('kiln_builds_running', async (set) => {
        const running = summed(
          (await this.rows()).filter((row) => row.admitted),
          () => ({}),
        );
        if (running.length === 0) set({}, 0);
        for (const [labels, builds] of running) set(labels, builds);
      }),
    );
  }

  onModuleDestroy(): void {
    for (const unregister of this.unregister.splice(0)) unregister();
  }

  /**
   * The rows of this scrape: the gauges are collected together, so the first asks and the others
   * share its answer; the next scrape reads again.
   */
  private rows(): Promise<QueueGaugeRow[]> {
    if (this.reading === undefined) {
      const reading = this.store.gauges(this.config.metrics.tenantLabels);
      this.reading = reading;
      const forget = () => {
        if (this.reading === reading) this.reading = undefined;
      };
      reading.then(forget, forget);
    }
    return this.reading;
  }
}

/**
 * The builds of `rows` summed by the labels `labelsOf` gives (with the row's tenant when the rows
 * are grouped by tenant): rows of one label set are one series.
 */
function summed(
  rows: readonly QueueGaugeRow[],
  labelsOf: (row: QueueGaugeRow) => Record<string, string>,
): Array<[Record<string, string>, number]> {
  const sums = new Map<string, [Record<string, string>, number]>();
  for (const row of rows) {
    const labels = {
      ...labelsOf(row),
      ...(row.tenantId === null ? {} : { tenant: row.tenantId }),
    };
    const key = JSON.stringify(labels);
    const sum = sums.get(key);
    if (sum === undefined) sums.set(key, [labels, row.builds]);
    else sum[1] += row.builds;
  }
  return [...sums.values()];
}
