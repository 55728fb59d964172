import type { V1ContainerStatus, V1Job, V1JobCondition, V1Pod } from '@kubernetes/client-node';
import { BUILDER_CONTAINER, SOURCE_CONTAINER } from '../../build-methods/job.js';
import { outcomeOf, pullFailingSince } from './outcome.js';
import { packerMessage } from '../../steps/packer-manifest.js';

const STARTED = new Date('2025-03-01T10:00:00Z');
const BUILDER_FINISHED = new Date('2025-03-01T10:04:07Z');
const JOB_COMPLETED = new Date('2025-03-01T10:04:09Z');
const JOB_FAILED = new Date('2025-03-01T10:04:11Z');
/** Long after all of the above: an operator back from an outage reads the objects. */
const NOW_MS = Date.parse('2025-03-01T11:00:00Z');

/** An object as the informers hold it: raw JSON, its timestamps RFC 3339 strings. */
function cached<T>(object: T): T {
  return JSON.parse(JSON.stringify(object)) as T;
}

function jobWith(conditions: V1JobCondition[], completionTime?: Date): V1Job {
  return cached({
    metadata: { name: 'kiln-b1' },
    status: {
      startTime: STARTED,
      ...(completionTime === undefined ? {} : { completionTime }),
      conditions,
    },
  });
}

const complete: V1JobCondition = {
  type: 'Complete',
  status: 'True',
  lastTransitionTime: JOB_COMPLETED,
};
const failed = (reason: string): V1JobCondition => ({
  type: 'Failed',
  status: 'True',
  reason,
  lastTransitionTime: JOB_FAILED,
});

function container(name: string, state: V1ContainerStatus['state']): V1ContainerStatus {
  return { name, image: `${name}:1`, imageID: '', ready: false, restartCount: 0, state };
}
const terminated = (name: string, exitCode: number, reason = 'Completed'): V1ContainerStatus =>
  container(name, {
    terminated: { exitCode, reason, startedAt: STARTED, finishedAt: BUILDER_FINISHED },
  });
const sourceDone = terminated(SOURCE_CONTAINER, 0);

function podWith(init: V1ContainerStatus[], builder: V1ContainerStatus): V1Pod {
  return cached({
    metadata: { name: 'kiln-b1-x' },
    status: { initContainerStatuses: init, containerStatuses: [builder] },
  });
}

/** When the build ended in the cluster, as the outcome of its Job says (undefined: no time). */
describe(outcomeOf.name, () => {
  it.each<[string, V1Job, V1Pod | undefined, 'success' | 'failed', Date | undefined]>([
    [
      "a success ended at the Job's completionTime",
      jobWith([complete], JOB_COMPLETED),
      podWith([sourceDone], terminated(BUILDER_CONTAINER, 0)),
      'success',
      JOB_COMPLETED,
    ],
    [
      'a builder that exited non-zero ended when it terminated, not when the Job failed',
      jobWith([failed('BackoffLimitExceeded')]),
      podWith([sourceDone], terminated(BUILDER_CONTAINER, 1, 'Error')),
      'failed',
      BUILDER_FINISHED,
    ],
    [
      'a builder killed for its memory ended when it terminated',
      jobWith([failed('BackoffLimitExceeded')]),
      podWith([sourceDone], terminated(BUILDER_CONTAINER, 137, 'OOMKilled')),
      'failed',
      BUILDER_FINISHED,
    ],
    [
      'a failed source container (the builder never ran) ended when the Job failed',
      jobWith([failed('BackoffLimitExceeded')]),
      podWith(
        [terminated(SOURCE_CONTAINER, 128, 'Error')],
        container(BUILDER_CONTAINER, { waiting: { reason: 'PodInitializing' } }),
      ),
      'failed',
      JOB_FAILED,
    ],
    [
      'a timed-out build whose builder is still being stopped ended when the Job failed',
      jobWith([failed('DeadlineExceeded')]),
      podWith([sourceDone], container(BUILDER_CONTAINER, { running: { startedAt: STARTED } })),
      'failed',
      JOB_FAILED,
    ],
    [
      'a build whose pod was deleted ended when the Job failed',
      jobWith([failed('BackoffLimitExceeded')]),
      undefined,
      'failed',
      JOB_FAILED,
    ],
    [
      'an image kiln gave up pulling has no end in the cluster: the write says when',
      jobWith([]),
      podWith([sourceDone], container(BUILDER_CONTAINER, { waiting: { reason: 'ErrImagePull' } })),
      'failed',
      undefined,
    ],
    [
      'a completionTime that is not a time gives no time',
      jobWith([complete], 'yesterday' as unknown as Date),
      podWith([sourceDone], terminated(BUILDER_CONTAINER, 0)),
      'success',
      undefined,
    ],
  ])('OP-03 %s', (_, job, pod, kind, endedAt) => {
    const outcome = outcomeOf(job, pod, {
      nowMs: NOW_MS,
      pullFailingSinceMs: STARTED.getTime(),
      imagePullTimeoutMs: 300_000,
      podSeen: true,
      timeoutSeconds: 600,
    });

    expect(outcome).toMatchObject({ kind });
    expect(outcome?.endedAt).toEqual(endedAt);
  });
});

describe('what a successful build pushed', () => {
  const DIGEST = `sha256:${'ab'.repeat(32)}`;
  const FACTS = {
    nowMs: NOW_MS,
    pullFailingSinceMs: undefined,
    imagePullTimeoutMs: 300_000,
    podSeen: true,
    timeoutSeconds: 600,
  };

  /** A completed Job whose pod template has these init containers and containers. */
  function jobOfPod(init: string[], containers: string[]): V1Job {
    const named = (names: string[]) => names.map((name) => ({ name, image: `${name}:1` }));
    return cached({
      ...jobWith([complete], JOB_COMPLETED),
      spec: {
        template: { spec: { initContainers: named(init), containers: named(containers) } },
      },
    });
  }

  /** A step that ended writing `message` to its termination message. */
  const reported = (name: string, message: string): V1ContainerStatus =>
    container(name, {
      terminated: { exitCode: 0, reason: 'Completed', message, finishedAt: BUILDER_FINISHED },
    });

  it('reads the image-ref step’s report, an init container before the upload', () => {
    const images = [`registry.example.com/team/app:v1@${DIGEST}`];
    const job = jobOfPod(['source', 'build', 'image-ref'], ['upload']);
    const pod = podWith(
      [
        sourceDone,
        terminated(BUILDER_CONTAINER, 0),
        reported('image-ref', JSON.stringify({ digest: DIGEST, images })),
      ],
      terminated('upload', 0),
    );

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      pushed: { digest: DIGEST, images },
    });
  });

  it('reads the s3-upload step’s report from the pod’s container', () => {
    const images = ['s3://kiln-images/p1/7-abababababab.oci.tar'];
    const job = jobOfPod(['source', 'build'], ['s3-upload']);
    const pod = podWith(
      [sourceDone, terminated(BUILDER_CONTAINER, 0)],
      reported('s3-upload', JSON.stringify({ digest: DIGEST, images })),
    );

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      pushed: { digest: DIGEST, images },
    });
  });

  it('says which step’s report it could not read', () => {
    const job = jobOfPod(['source', 'build'], ['s3-upload']);
    const pod = podWith(
      [sourceDone, terminated(BUILDER_CONTAINER, 0)],
      reported('s3-upload', 'uploaded'),
    );

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      pushed: { problem: 'the s3-upload step’s termination message is not JSON' },
    });
  });

  it('learns nothing from a build without a reporting step', () => {
    const job = jobOfPod(['source'], ['build']);
    const pod = podWith([sourceDone], terminated(BUILDER_CONTAINER, 0));

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      pushed: undefined,
      packer: undefined,
    });
  });

  it('reads what the packer-manifest step says packer made, from the pod’s container', () => {
    const artifacts = {
      manifestDigest: DIGEST,
      artifacts: [{ name: 'ubuntu', builderType: 'amazon-ebs', artifactId: 'us-east-1:ami-0e2c' }],
    };
    const job = jobOfPod(['source', 'packer-validate', 'build'], ['packer-manifest']);
    const pod = podWith(
      [sourceDone, terminated('packer-validate', 0), terminated(BUILDER_CONTAINER, 0)],
      reported('packer-manifest', packerMessage({ kind: 'artifacts', artifacts }).message),
    );

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      pushed: undefined,
      packer: { kind: 'artifacts', artifacts },
    });
  });

  it('makes a problem of a packer-manifest step that left no message', () => {
    const job = jobOfPod(['source', 'build'], ['packer-manifest']);
    const pod = podWith(
      [sourceDone, terminated(BUILDER_CONTAINER, 0)],
      reported('packer-manifest', ''),
    );

    expect(outcomeOf(job, pod, FACTS)).toMatchObject({
      kind: 'success',
      packer: { kind: 'problem', problem: 'the packer-manifest step left no termination message' },
    });
  });
});

describe(pullFailingSince.name, () => {
  const pullFailing = container(BUILDER_CONTAINER, { waiting: { reason: 'ImagePullBackOff' } });

  it('is undefined while every image pulls', () => {
    const pod = podWith([sourceDone], container(BUILDER_CONTAINER, { running: {} }));

    expect(pullFailingSince(pod)).toBeUndefined();
  });

  it('counts from the end of the container before the one that waits for its image', () => {
    const pod = podWith([sourceDone], pullFailing);
    pod.status!.startTime = STARTED.toISOString() as unknown as Date;

    expect(pullFailingSince(pod)).toBe(BUILDER_FINISHED.getTime());
  });

  it('counts from the pod’s start when no container ran before', () => {
    const pod = podWith([], pullFailing);
    pod.status!.startTime = STARTED.toISOString() as unknown as Date;

    expect(pullFailingSince(pod)).toBe(STARTED.getTime());
  });

  it('counts from the pod’s creation when it has no start yet', () => {
    const pod = podWith([], pullFailing);
    pod.metadata!.creationTimestamp = STARTED.toISOString() as unknown as Date;

    expect(pullFailingSince(pod)).toBe(STARTED.getTime());
  });
});
