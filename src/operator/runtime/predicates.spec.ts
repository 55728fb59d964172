import { BOOKKEEPING_FIELDS, changedBeyondMetadata } from './predicates.js';

interface Pod {
  metadata: Record<string, unknown> & { name: string };
  status?: { phase: string };
}

describe(changedBeyondMetadata.name, () => {
  const pod = (metadata: Record<string, unknown>, phase = 'Running'): Pod => ({
    metadata: { name: 'p', ...metadata },
    status: { phase },
  });
  const changed = changedBeyondMetadata<Pod>([...BOOKKEEPING_FIELDS, 'annotations']);

  it.each<[string, Pod, Pod, boolean]>([
    [
      'a new resourceVersion alone',
      pod({ resourceVersion: '1' }),
      pod({ resourceVersion: '2' }),
      false,
    ],
    [
      'rewritten managedFields and annotations',
      pod({ managedFields: [{ manager: 'a' }], annotations: { x: '1' } }),
      pod({ managedFields: [{ manager: 'b' }], annotations: { x: '2' } }),
      false,
    ],
    ['the status', pod({ resourceVersion: '1' }), pod({ resourceVersion: '2' }, 'Succeeded'), true],
    ['a label', pod({ labels: { a: '1' } }), pod({ labels: { a: '2' } }), true],
    ['a deletionTimestamp', pod({}), pod({ deletionTimestamp: '2026-11-23T06:00:00Z' }), true],
    ['a finalizer', pod({}), pod({ finalizers: ['kiln.dev/logs'] }), true],
  ])('%s: %s', (_, before, after, expected) => {
    expect(changed(before, after)).toBe(expected);
  });

  it('leaves the objects it compares as they were', () => {
    const before = pod({ resourceVersion: '1', annotations: { x: '1' } });
    changed(before, pod({ resourceVersion: '2' }));
    expect(before.metadata).toEqual({ name: 'p', resourceVersion: '1', annotations: { x: '1' } });
  });
});
