import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { AuditEventsRepository } from './audit-events.repository.js';

/** Rows deleted per transaction: a short statement that never holds the table for long. */
export const AUDIT_RETENTION_BATCH = 1000;
/** How often a replica tries to apply the policy. */
const AUDIT_RETENTION_INTERVAL_MS = 3_600_000;
/** The pause between two batches, so a large backlog leaves the disk to requests. */
const PAUSE_BETWEEN_BATCHES_MS = 50;

/**
 * Deletes audit events older than KILN_AUDIT_RETENTION_DAYS (0 keeps them all), an hour apart
 * and at start, in batches of AUDIT_RETENTION_BATCH rows, each its own transaction. One replica at
 * a time: a run holds an advisory lock, and a replica that cannot take it leaves the run to the
 * one that has it. Every run that removed rows logs how many.
 */
@Injectable()
export class AuditRetention implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(
    private readonly events: AuditEventsRepository,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.audit.retentionDays > 0) this.schedule(0);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  /**
   * Applies the policy once, until no event past it is left: answers how many rows went, or
   * undefined when another replica is applying it (or the policy keeps everything).
   */
  async runOnce(
    now: Date = new Date(),
    batch: number = AUDIT_RETENTION_BATCH,
  ): Promise<{ deleted: number; batches: number } | undefined> {
    const days = this.config.audit.retentionDays;
    if (days === 0) return undefined;
    const cutoff = new Date(now.getTime() - days * 86_400_000);
    const run = this.events.whileRetentionLocked(async () => {
      let deleted = 0;
      let batches = 0;
      while (!this.stopped) {
        const removed = await this.events.deleteOlderThan(cutoff, batch);
        if (removed === 0) break;
        deleted += removed;
        batches += 1;
        if (removed < batch) break;
        await new Promise((resolve) => setTimeout(resolve, PAUSE_BETWEEN_BATCHES_MS));
      }
      return { deleted, batches };
    });
    this.running = run;
    const outcome = await run;
    if (outcome !== undefined && outcome.deleted > 0) {
      this.logger.info(
        { deleted: outcome.deleted, batches: outcome.batches, before: cutoff.toISOString(), days },
        'audit retention: deleted audit events past the policy',
      );
    }
    return outcome;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.runOnce();
    } catch (error) {
      this.logger.warn({ err: error }, 'audit retention failed; trying again later');
    }
    this.schedule(AUDIT_RETENTION_INTERVAL_MS);
  }
}
