import { randomUUID } from 'node:crypto';
import type { ObjectStore } from './store.js';
import { clone, type KubeObject } from './types.js';

/** Who reports an Event: `job-controller`, `default-scheduler`, or `kubelet` on a node. */
export interface EventSource {
  component: string;
  host?: string;
}

/** What happened, as the controllers and the kubelet of the double report it. */
export interface EventNote {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** The part of the object it is about, e.g. `spec.containers{build}`. */
  fieldPath?: string;
}

const EVENTS = '/events';

const nowRfc3339 = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The correlator's aggregation: this many distinct messages of one kind within ten minutes. */
const AGGREGATE_MAX_EVENTS = 10;
const AGGREGATE_INTERVAL_MS = 600_000;

/**
 * client-go's core/v1 event recorder with its correlator (tools/record), for the double's
 * controllers. Each note becomes an Event named `<object>.<hex nanoseconds>`, in two stages:
 *
 * - Deduplication: the same note about the same object from the same source again (source,
 *   involved object with its fieldPath, type, reason, message) bumps `count` and `lastTimestamp`
 *   of that one Event instead of making another.
 * - Aggregation: notes that differ only in their message (a FailedCreate names the pod the
 *   server generated, different each try) make their own Events until the tenth distinct
 *   message within ten minutes; from then on they go to one Event whose message is
 *   `(combined from similar events): <the latest message>`, bumped like a duplicate.
 *
 * Like the real recorder it remembers which Event it made for a key, and makes a new one when
 * that was deleted meanwhile. Not modelled: its spam filter (25 Events per object, then one per
 * five minutes), which the double's short retries would reach at once where a real controller's
 * back-off takes hours to.
 */
export class EventRecorder {
  private readonly made = new Map<string, { namespace: string; name: string }>();
  private readonly similar = new Map<string, { messages: Set<string>; lastMs: number }>();
  private sequence = 0n;

  constructor(private readonly store: ObjectStore) {}

  record(involved: KubeObject, source: EventSource, note: EventNote): KubeObject {
    const namespace = involved.metadata.namespace ?? 'default';
    const involvedObject = {
      kind: involved.kind,
      namespace: involved.metadata.namespace ?? '',
      name: involved.metadata.name ?? '',
      uid: involved.metadata.uid ?? '',
      apiVersion: involved.apiVersion,
      resourceVersion: involved.metadata.resourceVersion ?? '',
      ...(note.fieldPath !== undefined ? { fieldPath: note.fieldPath } : {}),
    };
    const who = [
      source.component,
      source.host ?? '',
      involvedObject.kind,
      involvedObject.namespace,
      involvedObject.name,
      involvedObject.uid,
      involvedObject.apiVersion,
      note.type,
      note.reason,
    ];
    let key = JSON.stringify(['event', ...who, note.fieldPath ?? '', note.message]);
    let message = note.message;
    const aggregateKey = JSON.stringify(['aggregate', ...who]);
    const nowMs = Date.now();
    let record = this.similar.get(aggregateKey);
    if (record === undefined || nowMs - record.lastMs > AGGREGATE_INTERVAL_MS)
      record = { messages: new Set(), lastMs: nowMs };
    record.messages.add(note.message);
    record.lastMs = nowMs;
    this.similar.set(aggregateKey, record);
    if (record.messages.size >= AGGREGATE_MAX_EVENTS) {
      // As the real aggregator, forget one message so that the set stays below the threshold.
      const [any] = record.messages;
      if (any !== undefined) record.messages.delete(any);
      key = aggregateKey;
      message = `(combined from similar events): ${note.message}`;
    }

    const now = nowRfc3339();
    const known = this.made.get(key);
    const existing = known && this.store.get(EVENTS, known.namespace, known.name);
    if (existing) {
      const next = clone(existing);
      next.count = Number(existing.count ?? 1) + 1;
      next.lastTimestamp = now;
      next.message = message;
      return this.store.put(EVENTS, next);
    }
    const event: KubeObject = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: this.nameFor(namespace, involvedObject.name),
        namespace,
        uid: randomUUID(),
        creationTimestamp: now,
      },
      involvedObject,
      reason: note.reason,
      message,
      source: { component: source.component, ...(source.host ? { host: source.host } : {}) },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      type: note.type,
      eventTime: null,
      reportingComponent: source.component,
      reportingInstance: source.host ?? '',
    };
    const stored = this.store.put(EVENTS, event);
    this.made.set(key, { namespace, name: stored.metadata.name ?? '' });
    return stored;
  }

  /** `<object>.<hex of the time in nanoseconds>`, as the recorder names them; unique here. */
  private nameFor(namespace: string, object: string): string {
    for (;;) {
      const nanos = BigInt(Date.now()) * 1_000_000n + (this.sequence++ % 1_000_000n);
      const name = `${object}.${nanos.toString(16)}`;
      if (!this.store.get(EVENTS, namespace, name)) return name;
    }
  }
}
