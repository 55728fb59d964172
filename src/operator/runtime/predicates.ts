import type { KubeObjectLike } from '../../cluster/ports.js';

/**
 * An update predicate (controller-runtime's word) for `OperatorRuntime.watch`: true when the
 * object changed in anything but the named `metadata` fields. The server bumps
 * `resourceVersion` and rewrites `managedFields` on every write, and sidecars, probes and
 * tooling write annotations the reconciler never reads; an update that changes only those costs
 * a reconcile and finds nothing to do.
 */
export function changedBeyondMetadata<T extends KubeObjectLike>(
  ignored: readonly string[],
): (before: T, after: T) => boolean {
  const comparable = (object: T): string => {
    const metadata: Record<string, unknown> = { ...object.metadata };
    for (const field of ignored) delete metadata[field];
    return JSON.stringify({ ...object, metadata });
  };
  return (before, after) => comparable(before) !== comparable(after);
}

/** Fields every write changes: never a reason to reconcile by themselves. */
export const BOOKKEEPING_FIELDS = ['resourceVersion', 'managedFields'] as const;
