import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { BuildsService } from '../builds/builds.service.js';
import { ConflictError, KilnError, UnavailableError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { Metrics } from '../metrics/metrics.js';
import { decide } from './filters.js';
import type { GitEvent } from './git-event.js';
import { WorkGate } from './work-gate.js';
import {
  type DeliveryOutcome,
  type DeliveryRecord,
  type TriggerRecord,
  TriggersRepository,
} from './triggers.repository.js';

/** Trigger work one replica runs at once (each holds up to two pool connections). */
const GATE_WIDTH = 2;

/** What receiving a delivery came to: its record, and whether it was seen before. */
export interface Received {
  readonly delivery: DeliveryRecord;
  readonly duplicate: boolean;
}

/**
 * Turns git events into builds (docs/adr/0053-triggers.md). A delivery is recorded first, under
 * the provider's id, so a replayed or redelivered one builds nothing twice; the build is made
 * after, and the delivery's outcome says what came of it. Builds of one trigger and branch are
 * ordered by the trigger's concurrency rule under a lock that every replica takes (advance).
 */
@Injectable()
export class TriggerDispatcher {
  /**
   * Builds and concurrency passes wait here, one per trigger and branch and GATE_WIDTH at once,
   * before they take a pool connection for the lock: a burst of deliveries to one branch would
   * otherwise hold every connection waiting for the lock the first one holds.
   */
  private readonly gate = new WorkGate(GATE_WIDTH);

  constructor(
    private readonly triggers: TriggersRepository,
    private readonly builds: BuildsService,
    private readonly metrics: Metrics,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Records a delivery: `pending` when it is to be built (by build()), `filtered` with the reason
   * when the trigger's filters pass it by. A delivery id seen before records nothing.
   */
  async record(
    trigger: TriggerRecord,
    deliveryId: string,
    eventName: string,
    event: GitEvent | null,
  ): Promise<Received> {
    const verdict =
      event === null
        ? { build: false as const, why: `kiln does not build on ${eventName} events` }
        : event.kind === 'ping'
          ? { build: false as const, why: 'ping: the webhook reaches kiln' }
          : decide(trigger, event);
    const recorded = await this.triggers.recordDelivery(trigger.id, {
      deliveryId,
      event: event?.kind ?? eventName,
      ref: event?.ref ?? null,
      commit: event?.commit ?? null,
      pusher: event?.pusher ?? null,
      outcome: verdict.build ? 'pending' : 'filtered',
      detail: verdict.build ? null : verdict.why,
      eventData: verdict.build ? event : null,
    });
    if (recorded !== undefined) {
      if (recorded.outcome === 'filtered') this.counted(trigger, 'filtered');
      return { delivery: recorded, duplicate: false };
    }
    this.counted(trigger, 'duplicate');
    const earlier = await this.triggers.findDelivery(trigger.id, deliveryId);
    if (earlier === undefined) throw new Error(`delivery ${deliveryId} vanished`);
    return { delivery: earlier, duplicate: true };
  }

  /** record(), then build() at once: polling's way, which answers nobody in between. */
  async receive(
    trigger: TriggerRecord,
    deliveryId: string,
    event: GitEvent,
  ): Promise<DeliveryRecord> {
    const received = await this.record(trigger, deliveryId, event.kind, event);
    if (!received.duplicate && received.delivery.outcome === 'pending') {
      await this.build(trigger, received.delivery, event);
    }
    return received.delivery;
  }

  /**
   * Builds a pending delivery once: whoever claims it (the request that recorded it, or a replica
   * that finds it left pending) makes the build and settles the delivery's outcome.
   */
  build(trigger: TriggerRecord, delivery: DeliveryRecord, event: GitEvent): Promise<void> {
    const branch = event.kind === 'tag' ? event.tag : event.branch;
    return this.gate.run(lockKey(trigger.id, branch ?? ''), () =>
      this.buildNow(trigger, delivery, event, branch),
    );
  }

  private async buildNow(
    trigger: TriggerRecord,
    delivery: DeliveryRecord,
    event: GitEvent,
    branch: string | null,
  ): Promise<void> {
    if (!(await this.triggers.claimDelivery(delivery.id))) return;
    if (branch === null || event.commit === null) {
      await this.triggers.settleDelivery(
        delivery.id,
        'filtered',
        'no branch or commit to build',
        null,
      );
      this.counted(trigger, 'filtered');
      return;
    }
    try {
      const build = await this.triggers.withLock(lockKey(trigger.id, branch), async () => {
        const created = await this.builds.createForTrigger({
          tenantId: trigger.tenantId,
          projectId: trigger.projectId,
          createdBy: trigger.createdBy,
          what:
            trigger.build.form === 'reference'
              ? { form: 'reference', buildArgs: trigger.build.build_args }
              : { form: 'manifest', manifest: trigger.build.manifest },
          branch,
          commit: event.commit!,
          author: event.author,
          trigger: { id: trigger.id, event: event.kind, pusher: event.pusher },
        });
        if (trigger.statusTarget === null) await this.triggers.markNoStatus(created.id);
        if (trigger.start) await this.advanceLocked(trigger, branch);
        await this.triggers.settleDelivery(delivery.id, 'built', null, created.id);
        this.counted(trigger, 'built');
        return created;
      });
      this.logger.info(
        { trigger_id: trigger.id, delivery_id: delivery.deliveryId, build_id: build.id },
        'trigger built a delivery',
      );
    } catch (error) {
      await this.settleRefused(trigger, delivery, error);
    }
  }

  /** Applies the trigger's concurrency rule to its builds of one branch (level-based). */
  advance(trigger: TriggerRecord, branch: string): Promise<void> {
    const key = lockKey(trigger.id, branch);
    return this.gate.run(key, () =>
      this.triggers.withLock(key, () => this.advanceLocked(trigger, branch)),
    );
  }

  private async advanceLocked(trigger: TriggerRecord, branch: string): Promise<void> {
    const active = await this.triggers.activeBuilds(trigger.id, branch);
    const scope = { tenantId: trigger.tenantId };
    switch (trigger.concurrency) {
      case 'parallel':
        for (const build of active.filter((b) => b.status === 'queued')) {
          await this.tryStart(scope, build.id);
        }
        return;
      case 'serial': {
        if (active.some((b) => b.status === 'in_progress')) return;
        const next = active.find((b) => b.status === 'queued');
        if (next !== undefined) await this.tryStart(scope, next.id);
        return;
      }
      case 'latest-only': {
        const newest = active.at(-1);
        if (newest === undefined) return;
        const reason = `superseded by build #${newest.buildNumber} of a newer push to ${branch}`;
        for (const older of active.slice(0, -1)) {
          // Only a started build can be cancelled: an older one still queued (its start was
          // refused) is started to be cancelled, so it ends recorded as superseded.
          if (older.status === 'queued' && !(await this.tryStart(scope, older.id))) continue;
          await this.builds
            .cancel(scope, older.id, reason)
            .catch((error: unknown) =>
              this.logger.warn(
                { err: error, build_id: older.id },
                'could not cancel a superseded build',
              ),
            );
        }
        if (newest.status === 'queued') await this.tryStart(scope, newest.id);
        return;
      }
    }
  }

  /** Starts a build; one that cannot start now (no room, runner away) waits for the next pass. */
  private async tryStart(scope: { tenantId: string }, id: string): Promise<boolean> {
    try {
      await this.builds.start(scope, id);
      return true;
    } catch (error) {
      this.logger.warn({ err: error, build_id: id }, 'a trigger could not start its build yet');
      return false;
    }
  }

  /** Counts what came of a delivery (kiln_trigger_deliveries_total). */
  counted(trigger: TriggerRecord, outcome: DeliveryOutcome): void {
    this.metrics.inc('kiln_trigger_deliveries_total', { provider: trigger.provider, outcome });
  }

  private async settleRefused(
    trigger: TriggerRecord,
    delivery: DeliveryRecord,
    error: unknown,
  ): Promise<void> {
    if (error instanceof UnavailableError) {
      // Nothing was decided: the delivery stays pending, and the next pass builds it.
      this.logger.warn({ err: error, delivery_id: delivery.id }, 'a delivery waits to be built');
      await this.triggers.releaseDelivery(delivery.id).catch(() => undefined);
      return;
    }
    const [outcome, detail, buildId] =
      error instanceof ConflictError
        ? ['duplicate' as const, `${error.message}`, error.details?.build_id ?? null]
        : error instanceof KilnError
          ? ['refused' as const, error.message, null]
          : ['failed' as const, 'kiln could not make the build; see its log', null];
    this.counted(trigger, outcome);
    if (outcome === 'failed') {
      this.logger.error({ err: error, delivery_id: delivery.id }, 'a trigger could not build');
    }
    await this.triggers
      .settleDelivery(delivery.id, outcome, detail, buildId)
      .catch((settle: unknown) =>
        this.logger.error({ err: settle, delivery_id: delivery.id }, 'could not settle a delivery'),
      );
  }
}

function lockKey(triggerId: string, branch: string): string {
  return `kiln-trigger|${triggerId}|${branch}`;
}
