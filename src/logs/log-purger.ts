import {
  Inject,
  Injectable,
  Optional,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { Metrics } from '../metrics/metrics.js';
import { BuildLogsRepository, type PurgeBatch } from './build-logs.repository.js';
import { OneAtATime } from '../common/one-at-a-time.js';

/**
 * Removes the lines of deleted builds in the background (docs/adr/0027-log-purge.md). A build's
 * delete takes its row at once and leaves a purge record (a trigger writes it, whatever deleted
 * the build); every kiln process looks for records every KILN_LOG_PURGE_POLL_SECONDS and deletes
 * KILN_LOG_PURGE_BATCH_LINES lines per transaction. Between two batches it waits
 * KILN_LOG_PURGE_PAUSE_MS, or as long as the batch took when that is longer: a purge takes at
 * most about half of the time, and never holds the disk, the WAL or a lock for long. Processes
 * share the work (each batch locks its record, others skip it); a purge cut short by a crash or a
 * database outage goes on from its recorded position.
 */
@Injectable()
export class LogPurger implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private readonly oneAtATime = new OneAtATime();
  private stopped = false;

  constructor(
    private readonly logs: BuildLogsRepository,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    /** Without Metrics (medium tests build the purger by hand) nothing is counted. */
    @Optional() private readonly metrics?: Metrics,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule(0);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.oneAtATime.settled();
  }

  /**
   * Purges until no deleted build has lines left, without pauses, and answers how many lines it
   * deleted. For tests and tools; the background loop is the way in production.
   */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = await this.purgeBatch();
      if (batch === undefined) return total;
      total += batch.deleted;
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const started = performance.now();
    try {
      const batch = await this.purgeBatch();
      if (batch === undefined) {
        this.schedule(this.config.logPurgePollMs);
        return;
      }
      if (batch.done) this.logger.info({ buildId: batch.buildId }, 'deleted build’s log purged');
      const took = performance.now() - started;
      this.schedule(Math.max(this.config.logPurgePauseMs, took));
    } catch (error) {
      this.logger.warn({ err: error }, 'log purge failed; trying again later');
      this.schedule(this.config.logPurgePollMs);
    }
  }

  /** One batch, counted once its transaction committed. */
  private async purgeBatch(): Promise<PurgeBatch | undefined> {
    const batch = await this.oneAtATime.run(() =>
      this.logs.purgeBatch(this.config.logPurgeBatchLines),
    );
    if (batch !== undefined && batch.deleted > 0) {
      this.metrics?.inc('kiln_log_lines_purged_total', {}, batch.deleted);
    }
    return batch;
  }
}
