import { withoutCredentials } from '../common/url-credentials.js';
import type { GitEvent } from './git-event.js';
import type { GitCredentials } from './ls-remote.js';
import { planPoll, pollDeliveryId } from './poll-plan.js';

/** A trigger due for a poll, with its project's repository. */
export interface PollTarget {
  readonly triggerId: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly repositoryUrl: string;
  readonly intervalSeconds: number;
}

/** The triggers' polling state (the database's triggers and trigger_refs). */
export interface PollStore {
  /**
   * Up to `limit` enabled triggers whose poll is due, each moved to its next poll at once, so that
   * no other replica claims it meanwhile.
   */
  claimDue(limit: number): Promise<PollTarget[]>;
  /** The refs the last successful poll saw (full ref → commit); null before the first one. */
  knownRefs(triggerId: string): Promise<ReadonlyMap<string, string> | null>;
  /** Replaces the trigger's known refs. */
  saveRefs(triggerId: string, refs: ReadonlyMap<string, string>): Promise<void>;
  /** Why a poll of the trigger failed (a sentence without credentials); its refs stay as they were. */
  recordFailure(triggerId: string, message: string): Promise<void>;
}

export interface PollCredentials {
  /** The project's git credentials, if it has any. */
  forProject(tenantId: string, projectId: string): Promise<GitCredentials | undefined>;
}

export interface PollDispatch {
  /**
   * Handles an event as a webhook's delivery is handled (filters, build). A delivery id it has
   * seen for the trigger already is a duplicate that builds nothing.
   */
  receive(triggerId: string, deliveryId: string, event: GitEvent): Promise<void>;
}

/** A repository's branches and tags (lsRemote with kiln's child environment and timeout). */
export type ListRefs = (
  url: string,
  credentials: GitCredentials | undefined,
) => Promise<ReadonlyMap<string, string>>;

export interface TriggerPollerDeps {
  readonly store: PollStore;
  readonly credentials: PollCredentials;
  readonly dispatch: PollDispatch;
  readonly listRefs: ListRefs;
  /** How many due triggers one tick claims. */
  readonly batchSize: number;
}

/** How many repositories one replica lists at once. */
const CONCURRENCY = 4;

/**
 * Polls the repositories of triggers with a poll interval. Each tick claims the due triggers,
 * lists each one's branches and tags, and dispatches a push or tag event for each new or moved
 * ref (planPoll; the first poll of a trigger only records) before it saves the refs: a kiln that
 * dies in between dispatches them again at the next poll, and their delivery ids
 * (`poll:<ref>:<commit>`) make the second dispatch a duplicate. A poll that fails is recorded on
 * its trigger and leaves its refs as they were, so the next one catches up.
 */
export class TriggerPoller {
  constructor(private readonly deps: TriggerPollerDeps) {}

  /**
   * One round: how many triggers it claimed (a full batch means more may be due). Rejects when
   * no trigger could be claimed, or a failure could not even be recorded (after every claimed
   * trigger was polled).
   */
  async tick(): Promise<number> {
    const targets = await this.deps.store.claimDue(this.deps.batchSize);
    const queue = [...targets];
    const unrecorded: unknown[] = [];
    const worker = async (): Promise<void> => {
      for (let target = queue.shift(); target !== undefined; target = queue.shift()) {
        await this.poll(target).catch((error: unknown) => unrecorded.push(error));
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, worker));
    if (unrecorded.length > 0) {
      throw new AggregateError(unrecorded, 'the failure of a trigger poll could not be recorded');
    }
    return targets.length;
  }

  private async poll(target: PollTarget): Promise<void> {
    const { store } = this.deps;
    let refs: ReadonlyMap<string, string>;
    try {
      const credentials = await this.deps.credentials.forProject(target.tenantId, target.projectId);
      refs = await this.deps.listRefs(target.repositoryUrl, credentials);
    } catch (error) {
      await store.recordFailure(target.triggerId, messageOf(error));
      return;
    }
    try {
      const plan = planPoll(await store.knownRefs(target.triggerId), refs);
      for (const event of plan.events) {
        await this.deps.dispatch.receive(
          target.triggerId,
          pollDeliveryId(event.ref, event.commit),
          event,
        );
      }
      await store.saveRefs(target.triggerId, plan.next);
    } catch (error) {
      await store.recordFailure(
        target.triggerId,
        `the refs of ${withoutCredentials(target.repositoryUrl)} were listed, but their events could not be handled: ${messageOf(error)}`,
      );
    }
  }
}

function messageOf(error: unknown): string {
  return withoutCredentials(error instanceof Error ? error.message : String(error));
}
