import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { Metrics } from '../metrics/metrics.js';
import { BuildRunner } from '../runners/build-runner.js';
import {
  type DoomedBuild,
  RetentionRepository,
  type RetentionPolicy,
  type RetentionRule,
  type TenantRetention,
  type TenantRetentionChange,
} from './retention.repository.js';
import { OneAtATime } from '../common/one-at-a-time.js';

/** A tenant's policy: its own values (null inherits) and what applies. */
export interface TenantPolicyView extends TenantRetention {
  readonly effective: RetentionPolicy;
}

/** What one pass removed. */
export interface PassReport {
  readonly deleted: number;
  readonly byRule: Record<RetentionRule, number>;
  readonly byTenant: Record<string, number>;
  readonly batches: number;
}

/** The schedule is looked at this often at most, so a pass starts within a minute of its time. */
const SCHEDULE_POLL_MS = 60_000;

/**
 * Retention of finished builds (docs/adr/0050-retention.md). In the roles that serve the API
 * (where the runner is bound, which removes what it keeps for a deleted build), each replica looks
 * at the schedule every minute; the one that moves it on runs the pass. A pass deletes
 * KILN_RETENTION_BATCH_BUILDS builds per transaction, oldest first, and pauses between batches as
 * LogPurger does (KILN_LOG_PURGE_PAUSE_MS, or as long as the batch took when that is longer); the
 * lines of the deleted builds follow through LogPurger. Every pass logs one line with what it
 * removed and counts it in kiln_retention_builds_deleted_total{rule} and
 * kiln_retention_runs_total{result}.
 */
@Injectable()
export class Retention implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private readonly oneAtATime = new OneAtATime();
  private stopped = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly repository: RetentionRepository,
    private readonly runner: BuildRunner,
    private readonly metrics: Metrics,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake?.();
    await this.oneAtATime.settled();
  }

  /** The installation's policy (KILN_RETENTION_DAYS, KILN_RETENTION_KEEP_LAST). */
  installation(): RetentionPolicy {
    return { days: this.config.retention.days, keepLast: this.config.retention.keepLast };
  }

  async tenantPolicy(tenantId: string): Promise<TenantPolicyView> {
    return this.withEffective(await this.repository.tenantPolicy(tenantId));
  }

  async setTenantPolicy(
    tenantId: string,
    change: TenantRetentionChange,
  ): Promise<TenantPolicyView> {
    return this.withEffective(await this.repository.setTenantPolicy(tenantId, change));
  }

  /** What a pass would delete now: counts by rule and the first `limit` builds, oldest first. */
  preview(
    tenantId: string | undefined,
    limit: number,
  ): Promise<{ counts: Record<RetentionRule, number>; builds: DoomedBuild[] }> {
    return this.repository.preview(this.installation(), tenantId, limit);
  }

  /**
   * Runs one pass now, whatever the schedule says, and answers what it removed. Replicas may run
   * passes at the same time: each batch skips the builds another one holds. For tests and tools;
   * the schedule is the way in production.
   */
  runPass(): Promise<PassReport> {
    return this.oneAtATime.run(() => this.pass());
  }

  private schedule(): void {
    if (this.stopped) return;
    const delay = Math.min(this.config.retention.intervalMs, SCHEDULE_POLL_MS);
    this.timer = setTimeout(() => void this.tick(), delay);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      if (await this.repository.claimPass(this.config.retention.intervalMs)) {
        await this.runPass();
      }
    } catch (error) {
      this.logger.warn({ err: error }, 'retention could not look at its schedule');
    }
    this.schedule();
  }

  private async pass(): Promise<PassReport> {
    const started = performance.now();
    const policy = this.installation();
    const batchBuilds = this.config.retention.batchBuilds;
    const byRule: Record<RetentionRule, number> = { age: 0, count: 0 };
    const byTenant: Record<string, number> = {};
    let deleted = 0;
    let batches = 0;
    const report = (): PassReport => ({ deleted, byRule, byTenant, batches });
    try {
      while (!this.stopped) {
        const batchStarted = performance.now();
        const builds = await this.repository.deleteBatch(policy, batchBuilds);
        if (builds.length === 0) break;
        batches++;
        for (const build of builds) {
          deleted++;
          byRule[build.rule]++;
          byTenant[build.tenantId] = (byTenant[build.tenantId] ?? 0) + 1;
          this.metrics.inc('kiln_retention_builds_deleted_total', { rule: build.rule });
        }
        for (const build of builds) {
          await this.runner
            .remove(build)
            .catch((error: unknown) =>
              this.logger.error(
                { err: error, build_id: build.id },
                'the runner could not remove the resources of a deleted build',
              ),
            );
        }
        // Fewer than a batch: nothing else is left that no other replica holds.
        if (builds.length < batchBuilds) break;
        const took = performance.now() - batchStarted;
        await this.pause(Math.max(this.config.logPurgePauseMs, took));
      }
    } catch (error) {
      this.metrics.inc('kiln_retention_runs_total', { result: 'error' });
      this.logger.error(
        { err: error, retention: { ...report(), ms: Math.round(performance.now() - started) } },
        'retention pass failed; the next pass goes on',
      );
      throw error;
    }
    this.metrics.inc('kiln_retention_runs_total', { result: 'success' });
    this.logger.info(
      {
        retention: {
          ...report(),
          days: policy.days,
          keep_last: policy.keepLast,
          ms: Math.round(performance.now() - started),
        },
      },
      `retention pass deleted ${deleted} builds`,
    );
    return report();
  }

  private pause(ms: number): Promise<void> {
    return new Promise((done) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        done();
      };
    });
  }

  private withEffective(own: TenantRetention): TenantPolicyView {
    const installation = this.installation();
    return {
      ...own,
      effective: {
        days: own.days ?? installation.days,
        keepLast: own.keepLast ?? installation.keepLast,
      },
    };
  }
}
