import {
  BUILD_ID,
  LABELS,
  REPOSITORY,
  jobContext,
  specContext,
  stepsOffNotes,
  withoutRegistry,
  withoutRepository,
} from '../../test/support/job-fixtures.js';
import { manifestSpec } from '../../test/support/build-specs.js';
import type { V1Container, V1Job } from '@kubernetes/client-node';

import { type BuildSpec, type SpecContext, specOfReference } from '../manifest/build-spec.js';
import { KANIKO_IMAGE } from './images.js';
import {
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  type JobTranslation,
  SOURCE_SCRIPT,
} from './job.js';
import { kaniko, KANIKO_SECURITY_CONTEXT } from './kaniko.js';
import type { MethodName } from '../manifest/types.js';

/** kaniko's fixed flags, after the build's own. */
const FIXED_FLAGS = [
  '--snapshot-mode=redo',
  '--digest-file=/dev/termination-log',
  '--ignore-path=/product_uuid',
  '--log-format=text',
  '--log-timestamp=false',
];

const BUILDER_RESOURCES = {
  requests: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '2Gi' },
  limits: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '10Gi' },
};
const SOURCE_RESOURCES = {
  requests: { cpu: '100m', memory: '128Mi', 'ephemeral-storage': '256Mi' },
  limits: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '1Gi' },
};

const SHELL_BAIT = 'a b; rm -rf / && echo "$HOME" `id` $(id) | cat > /x \'q\' \\n';

/** The spec kiln stores for a manifest, through the same validation the API runs. */
function specOf(
  type: MethodName,
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return manifestSpec(ctx, type, buildConfig, extra);
}

/** A wizard kaniko build with an inline Dockerfile. */
function wizard(
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return specOf(
    'kaniko',
    { dockerfile: 'FROM alpine:3.20\nRUN echo hi\n', ...buildConfig },
    extra,
    ctx,
  );
}

function jobOfTranslation(translation: JobTranslation): V1Job {
  if (translation.kind !== 'job') throw new Error(`unsupported: ${translation.reason}`);
  return translation.job;
}

function builderOf(job: V1Job): V1Container {
  const [builder] = job.spec?.template.spec?.containers ?? [];
  if (builder === undefined) throw new Error('no builder container');
  return builder;
}

function containersOf(job: V1Job): V1Container[] {
  const pod = job.spec?.template.spec;
  return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])];
}

describe('kaniko.jobSpec', () => {
  it('runs a wizard build: the inline Dockerfile from a ConfigMap, the checkout as context, every tag pushed', () => {
    const spec = wizard(
      {
        registry_repository: 'harbor.example.com/team/app',
        build_context: 'app',
        build_args: { A: '1' },
        target: 'run',
      },
      { tags: ['v1', 'reg.io/other/img:2'] },
    );

    const translation = kaniko.jobSpec(spec, jobContext);

    expect(translation).toEqual({
      kind: 'job',
      notes: stepsOffNotes(spec),
      configMap: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `kiln-${BUILD_ID}`, namespace: 'kiln-builds', labels: LABELS },
        immutable: true,
        data: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
      },
      job: {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: `kiln-${BUILD_ID}`, namespace: 'kiln-builds', labels: LABELS },
        spec: {
          backoffLimit: 0,
          activeDeadlineSeconds: 900,
          template: {
            metadata: { labels: LABELS },
            spec: {
              restartPolicy: 'Never',
              automountServiceAccountToken: false,
              enableServiceLinks: false,
              securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
              initContainers: [
                {
                  name: 'source',
                  image: DEFAULT_JOB_SETTINGS.gitImage,
                  imagePullPolicy: 'IfNotPresent',
                  command: ['/bin/sh', '-c', SOURCE_SCRIPT, 'kiln-source'],
                  args: [REPOSITORY, '', ''],
                  env: [
                    { name: 'HOME', value: '/tmp' },
                    { name: 'GIT_TERMINAL_PROMPT', value: '0' },
                    { name: 'GIT_ALLOW_PROTOCOL', value: 'https:ssh:git' },
                  ],
                  workingDir: '/workspace',
                  resources: SOURCE_RESOURCES,
                  securityContext: {
                    runAsUser: 65532,
                    runAsGroup: 65532,
                    runAsNonRoot: true,
                    privileged: false,
                    allowPrivilegeEscalation: false,
                    readOnlyRootFilesystem: true,
                    capabilities: { drop: ['ALL'] },
                  },
                  terminationMessagePolicy: 'FallbackToLogsOnError',
                  volumeMounts: [
                    { name: 'workspace', mountPath: '/workspace' },
                    { name: 'source-tmp', mountPath: '/tmp' },
                  ],
                },
              ],
              containers: [
                {
                  name: 'build',
                  image: KANIKO_IMAGE,
                  imagePullPolicy: 'IfNotPresent',
                  command: ['/kaniko/executor'],
                  args: [
                    '--dockerfile=/kiln/dockerfile/Dockerfile',
                    '--context=dir:///workspace/source/app',
                    '--destination=harbor.example.com/team/app:v1',
                    '--destination=reg.io/other/img:2',
                    '--build-arg',
                    'CI=true',
                    '--build-arg',
                    'A=1',
                    '--target=run',
                    ...FIXED_FLAGS,
                  ],
                  env: [{ name: 'DOCKER_CONFIG', value: '/kaniko/.docker' }],
                  resources: BUILDER_RESOURCES,
                  securityContext: {
                    runAsUser: 0,
                    runAsGroup: 0,
                    runAsNonRoot: false,
                    privileged: false,
                    readOnlyRootFilesystem: false,
                    capabilities: {
                      add: [
                        'CHOWN',
                        'DAC_OVERRIDE',
                        'FOWNER',
                        'SETGID',
                        'SETUID',
                        'SETFCAP',
                        'KILL',
                      ],
                    },
                  },
                  terminationMessagePolicy: 'FallbackToLogsOnError',
                  volumeMounts: [
                    { name: 'workspace', mountPath: '/workspace' },
                    { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
                  ],
                },
              ],
              volumes: [
                { name: 'workspace', emptyDir: {} },
                { name: 'source-tmp', emptyDir: {} },
                {
                  name: 'dockerfile',
                  configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 },
                },
              ],
            },
          },
        },
      },
    });
  });

  it('returns plain JSON: the object survives a JSON round trip unchanged', () => {
    const translation = kaniko.jobSpec(wizard({ registry_repository: 'reg.io/a/b' }), jobContext);

    expect(JSON.parse(JSON.stringify(translation))).toEqual(translation);
  });

  it.each<{
    name: string;
    spec: BuildSpec;
    context?: Partial<JobContext>;
    args: string[];
    volumes: object[];
    mounts: object[];
    source: string[] | undefined;
    configMap: Record<string, string> | undefined;
    notes?: string[];
  }>([
    {
      name: 'a wizard build without a repository: the ConfigMap alone is the context, no checkout',
      spec: wizard({ registry_repository: 'reg.io/team/app' }, {}, withoutRepository),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ],
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      source: undefined,
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
    {
      name: 'the layer cache in the named cache repository',
      spec: wizard(
        { registry_repository: 'reg.io/team/app', cache: true, cache_repo: 'reg.io/team/cache' },
        {},
        withoutRepository,
      ),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        '--cache=true',
        '--cache-repo=reg.io/team/cache',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ],
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      source: undefined,
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
    {
      name: 'the layer cache beside the output repository when no cache repository is named',
      spec: wizard({ registry_repository: 'reg.io/team/app', cache: true }, {}, withoutRepository),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        '--cache=true',
        '--cache-repo=reg.io/team/app/cache',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ],
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      source: undefined,
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
    {
      name: "a reference-form build: the repository's Dockerfile at a branch and commit, numbered tag",
      spec: specOfReference(
        { branch: 'release/1.2', commit: 'abc1234', buildArgs: { VERSION: '1.2' } },
        specContext,
      ),
      args: [
        '--dockerfile=/workspace/source/Dockerfile',
        '--context=dir:///workspace/source',
        '--destination=127.0.0.1:5000/kiln/my-web:7',
        '--build-arg',
        'VERSION=1.2',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'workspace', emptyDir: {} },
        { name: 'source-tmp', emptyDir: {} },
      ],
      mounts: [{ name: 'workspace', mountPath: '/workspace' }],
      source: [REPOSITORY, 'release/1.2', 'abc1234'],
      configMap: undefined,
    },
    {
      name: 'no registry at all: --no-push, with a note for the build log',
      spec: specOfReference({ branch: null, commit: null, buildArgs: null }, withoutRegistry),
      args: [
        '--dockerfile=/workspace/source/Dockerfile',
        '--context=dir:///workspace/source',
        '--no-push',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'workspace', emptyDir: {} },
        { name: 'source-tmp', emptyDir: {} },
      ],
      mounts: [{ name: 'workspace', mountPath: '/workspace' }],
      source: [REPOSITORY, '', ''],
      configMap: undefined,
      notes: [
        'no registry is configured for this build, so the image is built but not pushed (kaniko --no-push)',
      ],
    },
    {
      name: "the credentials Secret mounted as kaniko's Docker config",
      spec: wizard({ registry_repository: 'reg.io/team/app' }, {}, withoutRepository),
      context: { settings: { ...DEFAULT_JOB_SETTINGS, credentialsSecret: 'registry-push' } },
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
        {
          name: 'registry-credentials',
          secret: {
            secretName: 'registry-push',
            items: [{ key: '.dockerconfigjson', path: 'config.json' }],
            defaultMode: 0o400,
          },
        },
      ],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        { name: 'registry-credentials', mountPath: '/kaniko/.docker', readOnly: true },
      ],
      source: undefined,
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
    {
      name: "a build's own credentials Secret wins over the operator's",
      spec: specOfReference({ branch: null, commit: null, buildArgs: null }, specContext),
      context: {
        settings: { ...DEFAULT_JOB_SETTINGS, credentialsSecret: 'registry-push' },
        credentialsSecret: `kiln-${BUILD_ID}-registry`,
      },
      args: [
        '--dockerfile=/workspace/source/Dockerfile',
        '--context=dir:///workspace/source',
        '--destination=127.0.0.1:5000/kiln/my-web:7',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'workspace', emptyDir: {} },
        { name: 'source-tmp', emptyDir: {} },
        {
          name: 'registry-credentials',
          secret: {
            secretName: `kiln-${BUILD_ID}-registry`,
            items: [{ key: '.dockerconfigjson', path: 'config.json' }],
            defaultMode: 0o400,
          },
        },
      ],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'registry-credentials', mountPath: '/kaniko/.docker', readOnly: true },
      ],
      source: [REPOSITORY, '', ''],
      configMap: undefined,
    },
    {
      name: 'a build arg with spaces and shell metacharacters stays one argv element',
      spec: wizard({ registry_repository: 'reg.io/team/app', build_args: { MSG: SHELL_BAIT } }),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///workspace/source',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        '--build-arg',
        `MSG=${SHELL_BAIT}`,
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'workspace', emptyDir: {} },
        { name: 'source-tmp', emptyDir: {} },
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
      ],
      source: [REPOSITORY, '', ''],
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
    {
      name: 'insecure registries: plain HTTP and unverified TLS for those registries only',
      spec: wizard({ registry_repository: 'reg.io/team/app' }, {}, withoutRepository),
      context: {
        settings: { ...DEFAULT_JOB_SETTINGS, insecureRegistries: ['127.0.0.1:5000'] },
      },
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--destination=reg.io/team/app:v1',
        '--build-arg',
        'CI=true',
        '--insecure-registry=127.0.0.1:5000',
        '--skip-tls-verify-registry=127.0.0.1:5000',
        ...FIXED_FLAGS,
      ],
      volumes: [
        { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ],
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      source: undefined,
      configMap: { Dockerfile: 'FROM alpine:3.20\nRUN echo hi\n' },
    },
  ])('$name', ({ spec, context, args, volumes, mounts, source, configMap, notes = [] }) => {
    const translation = kaniko.jobSpec(spec, { ...jobContext, ...context });
    const job = jobOfTranslation(translation);
    const pod = job.spec?.template.spec;
    const builder = builderOf(job);

    expect(builder.args).toEqual(args);
    expect(pod?.volumes).toEqual(volumes);
    expect(builder.volumeMounts).toEqual(mounts);
    expect(pod?.initContainers?.map((container) => container.args)).toEqual(
      source === undefined ? undefined : [source],
    );
    expect(translation.kind === 'job' && translation.configMap?.data).toEqual(configMap);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      ...notes,
      ...stepsOffNotes(spec),
    ]);
    expect(builder.securityContext).toEqual(KANIKO_SECURITY_CONTEXT);
    expect(builder.resources).toEqual(BUILDER_RESOURCES);
    expect(job.metadata?.labels).toEqual(LABELS);
    expect(job.spec?.template.metadata?.labels).toEqual(LABELS);
    expect(job.spec?.activeDeadlineSeconds).toBe(900);
  });

  it('registry_type s3: kaniko writes an OCI layout directory for s3-upload and pushes nothing', () => {
    const spec = wizard(
      { registry_type: 's3', registry_repository: 'reg.io/team/app' },
      { environment: {} },
    );
    const kilnImage = `registry.example.com/kiln@sha256:${'5'.repeat(64)}`;

    const translation = kaniko.jobSpec(spec, {
      ...jobContext,
      settings: { ...DEFAULT_JOB_SETTINGS, steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage } },
      s3: { bucket: 'kiln-images', region: 'eu-west-1', credentials: false },
    });

    const job = jobOfTranslation(translation);
    const pod = job.spec!.template.spec!;
    const builder = pod.initContainers!.find((c) => c.name === 'build')!;
    // kaniko's README: --oci-layout-path "a directory in the container where the OCI image
    // layout of a built image will be placed"; DoPush writes it before the --no-push return.
    expect(builder.args).toEqual([
      '--dockerfile=/kiln/dockerfile/Dockerfile',
      '--context=dir:///workspace/source',
      '--no-push',
      '--oci-layout-path=/kiln/out/oci-layout',
      ...FIXED_FLAGS,
    ]);
    expect(builder.volumeMounts).toContainEqual({ name: 'kiln-out', mountPath: '/kiln/out' });
    expect(pod.containers.map((c) => [c.name, c.image, c.args])).toEqual([
      ['s3-upload', kilnImage, ['s3-upload', 'oci-dir', 'oci-layout']],
    ]);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      'registry_type s3: the image is written as an OCI image layout and uploaded to s3://kiln-images/ by the s3-upload step, not pushed to a registry',
      'the SBOM (syft) and scan (trivy) steps do not run for registry_type s3: they read the image from a registry, and this one goes to S3',
    ]);
    expect(hardeningProblems(job)).toEqual([]);
  });

  it('runs the service account the operator names, still without its token', () => {
    const job = jobOfTranslation(
      kaniko.jobSpec(wizard({ registry_repository: 'reg.io/team/app' }), {
        ...jobContext,
        settings: { ...DEFAULT_JOB_SETTINGS, serviceAccountName: 'kiln-build' },
      }),
    );

    expect(job.spec?.template.spec).toMatchObject({
      serviceAccountName: 'kiln-build',
      automountServiceAccountToken: false,
    });
  });

  it.each<[string, BuildSpec, string]>([
    [
      'a reference-form build of a project without a repository',
      specOfReference({ branch: 'main', commit: null, buildArgs: null }, withoutRepository),
      'the project has no git repository to build from',
    ],
    [
      'a build context outside the checkout',
      wizard({ registry_repository: 'reg.io/team/app', build_context: '../../etc' }),
      'build context ../../etc is outside the source',
    ],
    [
      'a build context without a repository to find it in',
      wizard(
        { registry_repository: 'reg.io/team/app', build_context: 'app' },
        {},
        withoutRepository,
      ),
      'build context app names a directory of the repository, but the project has no git repository',
    ],
    [
      'a Dockerfile larger than a ConfigMap holds',
      wizard({
        registry_repository: 'reg.io/team/app',
        dockerfile: `FROM scratch\n${'#'.repeat(1_000_000)}`,
      }),
      'the Dockerfile is 1000013 bytes; a build on Kubernetes takes at most 1000000',
    ],
  ])('refuses %s, with the reason', (_name, spec, reason) => {
    expect(kaniko.jobSpec(spec, jobContext)).toEqual({ kind: 'unsupported', reason });
  });
});

describe('every kaniko Job', () => {
  const user = { branch: 'feat/$(id)', commit: 'deadbee', arg: SHELL_BAIT };
  const cases: Array<[string, BuildSpec, Partial<JobContext>]> = [
    [
      'a wizard build',
      wizard({ registry_repository: 'reg.io/team/app', build_args: { X: user.arg } }),
      {},
    ],
    [
      'a wizard build without a repository',
      wizard({ registry_repository: 'reg.io/a/b' }, {}, withoutRepository),
      {},
    ],
    ['a cached build', wizard({ registry_repository: 'reg.io/team/app', cache: true }), {}],
    [
      'a reference-form build',
      specOfReference(
        { branch: user.branch, commit: user.commit, buildArgs: { X: user.arg } },
        specContext,
      ),
      {},
    ],
    [
      'an unpushed build',
      specOfReference({ branch: null, commit: null, buildArgs: null }, withoutRegistry),
      {},
    ],
    [
      'a build with credentials',
      wizard({ registry_repository: 'reg.io/team/app' }),
      { credentialsSecret: 'push', settings: { ...DEFAULT_JOB_SETTINGS, serviceAccountName: 'b' } },
    ],
  ];

  it.each(cases)('%s keeps the hardening rules', (_name, spec, context) => {
    const job = jobOfTranslation(kaniko.jobSpec(spec, { ...jobContext, ...context }));
    const pod = job.spec?.template.spec;

    expect(hardeningProblems(job)).toEqual([]);
    expect(job.spec?.backoffLimit).toBe(0);
    expect(job.spec?.ttlSecondsAfterFinished).toBeUndefined();
    expect(job.metadata?.ownerReferences).toBeUndefined();
    expect(pod?.restartPolicy).toBe('Never');
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.enableServiceLinks).toBe(false);
    expect(Object.keys(pod ?? {}).filter((key) => key.startsWith('host'))).toEqual([]);
    expect(pod?.volumes?.filter((volume) => volume.hostPath !== undefined)).toEqual([]);
    for (const container of containersOf(job)) {
      expect(container.image).toMatch(/@sha256:[0-9a-f]{64}$/);
      for (const kind of ['requests', 'limits'] as const) {
        expect(Object.keys(container.resources?.[kind] ?? {}).sort()).toEqual([
          'cpu',
          'ephemeral-storage',
          'memory',
        ]);
      }
      expect(container.securityContext?.privileged).toBe(false);
      expect(container.terminationMessagePolicy).toBe('FallbackToLogsOnError');
    }
  });

  it.each(cases)('%s passes user text to no shell script', (_name, spec, context) => {
    const job = jobOfTranslation(kaniko.jobSpec(spec, { ...jobContext, ...context }));

    for (const container of containersOf(job)) {
      const argv = [...(container.command ?? []), ...(container.args ?? [])];
      const script = argv.indexOf('-c') === -1 ? undefined : argv[argv.indexOf('-c') + 1];
      if (script === undefined) continue;
      expect(script).toBe(SOURCE_SCRIPT);
      for (const text of [REPOSITORY, user.branch, user.commit, user.arg]) {
        expect(script).not.toContain(text);
      }
    }
  });

  it.each(cases)('%s runs git as non-root without capabilities', (_name, spec, context) => {
    const job = jobOfTranslation(kaniko.jobSpec(spec, { ...jobContext, ...context }));

    for (const source of job.spec?.template.spec?.initContainers ?? []) {
      expect(source.securityContext).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(source.securityContext?.runAsUser).not.toBe(0);
    }
  });
});
