import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { OneAtATime } from '../common/one-at-a-time.js';
import { KilnConfig } from '../config/config.js';
import { STATUS_CHANNEL } from '../database/channels.js';
import type { NotificationListener } from '../database/notification-listener.js';
import { Notifications } from '../database/notification-listener.js';
import { TriggerDispatcher } from './trigger-dispatcher.js';
import { TriggersRepository } from './triggers.repository.js';

/** How many items of each kind one pass takes on. */
const BATCH = 50;

/** One piece of a pass: a name for the log, and the work (it answers how much it did). */
export interface TriggerChore {
  readonly name: string;
  run(): Promise<number>;
}

/**
 * The background work of triggers, on every replica that serves the API
 * (docs/adr/0053-triggers.md): deliveries left pending by a replica that stopped, builds a
 * concurrency rule holds back (a serial branch whose build ended), polls that are due, and commit
 * statuses to post. Each chore claims its rows, so replicas share the work without doing it
 * twice. A pass runs every KILN_TRIGGER_WORK_INTERVAL_MS, and at once when a build's status
 * changes (a serial build ended, a status is to be posted).
 */
@Injectable()
export class TriggerWorker implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private readonly oneAtATime = new OneAtATime();
  private readonly listener: NotificationListener;
  private readonly chores: TriggerChore[] = [];
  private stopped = false;
  private again = false;

  constructor(
    private readonly triggers: TriggersRepository,
    private readonly dispatcher: TriggerDispatcher,
    private readonly config: KilnConfig,
    notifications: Notifications,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.listener = notifications.listen([STATUS_CHANNEL]);
    this.listener.on('notification', () => this.soon());
    this.listener.on('reconnected', () => this.soon());
    this.chores.push(
      { name: 'unbuilt deliveries', run: () => this.buildUnbuilt() },
      { name: 'held builds', run: () => this.advanceHeld() },
    );
  }

  /** Adds a chore to every pass (polling and commit statuses register theirs). */
  add(chore: TriggerChore): void {
    this.chores.push(chore);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.listener.start();
    this.schedule(this.config.triggers.workIntervalMs);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.oneAtATime.settled();
    await this.listener.close();
  }

  /** Runs one pass now (tests and tools; the schedule is the way in production). */
  runPass(): Promise<void> {
    return this.oneAtATime.run(() => this.pass());
  }

  private soon(): void {
    if (this.stopped) return;
    this.again = true;
    this.schedule(0);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), delay);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.again = false;
    await this.runPass();
    this.schedule(this.again ? 0 : this.config.triggers.workIntervalMs);
  }

  private async pass(): Promise<void> {
    for (const chore of this.chores) {
      if (this.stopped) return;
      try {
        await chore.run();
      } catch (error) {
        this.logger.warn(
          { err: error, chore: chore.name },
          'a trigger chore failed; next pass retries',
        );
      }
    }
  }

  private async buildUnbuilt(): Promise<number> {
    const unbuilt = await this.triggers.unbuiltDeliveries(BATCH);
    for (const { trigger, delivery, event } of unbuilt) {
      await this.dispatcher.build(trigger, delivery, event);
    }
    return unbuilt.length;
  }

  private async advanceHeld(): Promise<number> {
    const held = await this.triggers.branchesWithQueuedBuilds(BATCH);
    for (const { trigger, branch } of held) await this.dispatcher.advance(trigger, branch);
    return held.length;
  }
}
