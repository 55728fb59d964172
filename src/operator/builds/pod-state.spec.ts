import type { V1Pod } from '@kubernetes/client-node';
import { podChanged } from './pod-state.js';

const running: V1Pod = {
  metadata: { name: 'kiln-b-x', labels: { 'job-name': 'kiln-b' }, resourceVersion: '1' },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'True' }],
    containerStatuses: [
      {
        name: 'build',
        image: 'kaniko',
        imageID: '',
        ready: true,
        restartCount: 0,
        state: { running: { startedAt: new Date('2026-11-23T06:00:00Z') } },
      },
    ],
  },
};

function edit(change: (pod: V1Pod) => void): V1Pod {
  const pod = structuredClone(running);
  change(pod);
  return pod;
}

describe(podChanged.name, () => {
  it.each<[string, V1Pod, boolean]>([
    [
      'an annotation and a resourceVersion',
      edit((p) => {
        p.metadata!.annotations = { 'probe.example/seen': '1' };
        p.metadata!.resourceVersion = '2';
      }),
      false,
    ],
    [
      'readiness and a condition',
      edit((p) => {
        p.status!.containerStatuses![0]!.ready = false;
        p.status!.conditions = [{ type: 'Ready', status: 'False' }];
      }),
      false,
    ],
    [
      'the container terminating',
      edit((p) => {
        p.status!.containerStatuses![0]!.state = {
          terminated: { exitCode: 1, reason: 'Error' },
        };
      }),
      true,
    ],
    ['the phase', edit((p) => (p.status!.phase = 'Failed')), true],
    ['an eviction', edit((p) => (p.status!.reason = 'Evicted')), true],
    [
      'a deletion',
      edit((p) => (p.metadata!.deletionTimestamp = new Date('2026-11-23T06:01:00Z'))),
      true,
    ],
    [
      'an image pull failing',
      edit((p) => {
        p.status!.containerStatuses![0]!.state = { waiting: { reason: 'ErrImagePull' } };
      }),
      true,
    ],
  ])('%s: %s', (_, after, changed) => {
    expect(podChanged(running, after)).toBe(changed);
  });
});
