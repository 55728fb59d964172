import type { CoreV1Event, V1Job, V1Pod } from '@kubernetes/client-node';
import { podWaitOf } from './pod-wait.js';

const JOB: V1Job = { metadata: { name: 'kiln-b1', uid: 'job-2' } };

function event(reason: string, message: string, at: string, uid = 'job-2'): CoreV1Event {
  return {
    metadata: { name: `kiln-b1.${reason}` },
    involvedObject: { kind: 'Job', name: 'kiln-b1', uid },
    reason,
    message,
    type: 'Warning',
    lastTimestamp: at as unknown as Date,
  };
}

const QUOTA =
  'Error creating: pods "kiln-b1-x" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1';

function pending(pod: Partial<NonNullable<V1Pod['status']>>): V1Pod {
  return { metadata: { name: 'kiln-b1-x' }, status: { phase: 'Pending', ...pod } };
}

describe(podWaitOf.name, () => {
  it('reads a full quota from the latest FailedCreate of this Job, not of an earlier one of its name', () => {
    expect(
      podWaitOf(JOB, undefined, [event('FailedCreate', QUOTA, '2026-11-27T10:00:00Z')]),
    ).toEqual({
      kind: 'waits',
      reason: 'ClusterQuota',
      message: QUOTA.replace('Error creating: ', ''),
    });
    expect(
      podWaitOf(JOB, undefined, [event('FailedCreate', QUOTA, '2026-11-27T10:00:00Z', 'job-1')]),
    ).toBeUndefined();
  });

  it('takes the latest refusal: a quota that later turned into a Pod Security refusal refuses', () => {
    const wait = podWaitOf(JOB, undefined, [
      event('FailedCreate', QUOTA, '2026-11-27T10:00:00Z'),
      event(
        'FailedCreate',
        'Error creating: pods "kiln-b1-x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "build" must not set securityContext.privileged=true)',
        '2026-11-27T10:00:05Z',
      ),
    ]);
    expect(wait).toEqual({
      kind: 'refused',
      message: expect.stringMatching(
        /^the cluster refused the build's pod: pods "kiln-b1-x" is forbidden: violates PodSecurity/,
      ),
    });
  });

  it('says PodNotCreated with the text for a refusal it does not know, which may pass', () => {
    expect(
      podWaitOf(JOB, undefined, [
        event(
          'FailedCreate',
          'Error creating: Internal error occurred: etcdserver: request timed out',
          '2026-11-27T10:00:00Z',
        ),
      ]),
    ).toEqual({
      kind: 'waits',
      reason: 'PodNotCreated',
      message: 'Internal error occurred: etcdserver: request timed out',
    });
  });

  it('reads the pod: a pull that fails, a missing Secret, a pod that runs', () => {
    const container = (waiting: { reason: string; message?: string }) => ({
      name: 'build',
      image: 'gcr.io/kaniko-project/executor:v1',
      imageID: '',
      ready: false,
      restartCount: 0,
      state: { waiting },
    });
    expect(
      podWaitOf(
        JOB,
        pending({
          containerStatuses: [
            container({ reason: 'ImagePullBackOff', message: 'Back-off pulling image' }),
          ],
        }),
        [],
      ),
    ).toEqual({
      kind: 'waits',
      reason: 'ImagePull',
      message: 'image gcr.io/kaniko-project/executor:v1 of container build: Back-off pulling image',
    });
    expect(
      podWaitOf(
        JOB,
        pending({
          containerStatuses: [
            container({
              reason: 'CreateContainerConfigError',
              message: 'secret "kiln-b1" not found',
            }),
          ],
        }),
        [],
      ),
    ).toEqual({
      kind: 'waits',
      reason: 'CreateContainerConfigError',
      message: 'container build: secret "kiln-b1" not found',
    });
    expect(
      podWaitOf(JOB, { status: { phase: 'Running' } }, [
        event('FailedCreate', QUOTA, '2026-11-27T10:00:00Z'),
      ]),
    ).toBeUndefined();
  });

  it('reads a suspended Job from its Kueue Workload (KILN_ADMISSION=kueue)', () => {
    const suspended: V1Job = { ...JOB, spec: { suspend: true, template: {} } };
    const workload = (status: string, reason: string, message: string) => ({
      metadata: { name: 'job-kiln-b1-1a2b3' },
      status: { conditions: [{ type: 'QuotaReserved', status, reason, message }] },
    });
    expect(podWaitOf(suspended, undefined, [], undefined)).toEqual({
      kind: 'waits',
      reason: 'KueueQueued',
      message: "Kueue has not made the Job's Workload yet",
    });
    expect(
      podWaitOf(
        suspended,
        undefined,
        [],
        workload('False', 'Inadmissible', "LocalQueue team-a doesn't exist"),
      ),
    ).toEqual({
      kind: 'waits',
      reason: 'KueueInadmissible',
      message: "Workload job-kiln-b1-1a2b3: LocalQueue team-a doesn't exist",
    });
    expect(
      podWaitOf(suspended, undefined, [], workload('True', 'QuotaReserved', 'Quota reserved')),
    ).toBeUndefined();
  });
});
