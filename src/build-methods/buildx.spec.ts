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
import {
  baselineViolations,
  type PodSpec,
  restrictedViolations,
} from '../../test/support/pod-security.js';
import type { V1Container, V1Job } from '@kubernetes/client-node';

import type { BuildSpec, SpecContext } from '../manifest/build-spec.js';
import { BUILDKIT_SECURITY_CONTEXT, buildx, buildxJob, POD_SECURITY_LEVEL } from './buildx.js';
import { BUILDKIT_IMAGE } from './images.js';
import {
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  type JobTranslation,
  SOURCE_SCRIPT,
} from './job.js';
import { dockerfilePlan } from './method.js';

/*
 * Every expected flag is buildctl's, as BuildKit's README documents it, passed as Shipwright's
 * buildkit strategy and BuildKit's buildctl-daemonless.sh pass them:
 *   --frontend=dockerfile.v0 --opt=filename=… --local=context=… --local=dockerfile=…
 *   [--opt=target=…] [--opt=build-arg:K=V …] [--opt=platform=a,b] [--secret id=…,src=…]
 *   --output=type=image,name=…,push=true[,registry.insecure=true]
 *   --export-cache=type=registry,ref=…,mode=max --import-cache=type=registry,ref=…
 *   --metadata-file=… --progress=plain
 */

const DOCKERFILE = 'FROM alpine:3.20\nRUN --mount=type=secret,id=npm cat /run/secrets/npm\n';
const SECRET_VALUE = 'npm_s3cr3t-VALUE-that-must-stay-in-the-Secret';
const SHELL_BAIT = 'a b; rm -rf / && echo "$HOME" `id` $(id) | cat > /x \'q\' \\n';

/** The Dockerfile from the ConfigMap (buildctl's --opt=filename and --local=dockerfile). */
const INLINE = ['--local=dockerfile=/kiln/dockerfile', '--opt=filename=Dockerfile'];
/** What every pushed build ends with: the image output and its metadata (digest) file. */
const pushed = (name: string, extra = ''): string[] => [
  `--output=type=image,${name},push=true${extra}`,
  '--metadata-file=/kiln/out/buildkit-metadata.json',
  '--progress=plain',
];

const CONFIGMAP_VOLUME = {
  name: 'dockerfile',
  configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 },
};
const CHECKOUT_VOLUMES = [
  { name: 'workspace', emptyDir: {} },
  { name: 'source-tmp', emptyDir: {} },
];
const OUT_VOLUME = { name: 'kiln-out', emptyDir: {} };
/** Daemon state and XDG_RUNTIME_DIR are emptyDirs (BuildKit's job.rootless.yaml, Shipwright). */
const SCRATCH_VOLUMES = [
  { name: 'buildkitd', emptyDir: {} },
  { name: 'buildkit-run', emptyDir: {} },
];
const SCRATCH_MOUNTS = [
  { name: 'buildkitd', mountPath: '/home/user/.local/share/buildkit' },
  { name: 'buildkit-run', mountPath: '/home/user/.local/tmp' },
];
const OUT_MOUNT = { name: 'kiln-out', mountPath: '/kiln/out' };

/** A wizard buildx build, through the same validation the API runs. */
function wizard(
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return manifestSpec(ctx, 'buildx', { dockerfile: DOCKERFILE, ...buildConfig }, extra);
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

describe('buildx.jobSpec', () => {
  it('runs a wizard build in rootless BuildKit: every field of the manifest on the command line', () => {
    const spec = wizard(
      {
        registry_repository: 'harbor.example.com/team/app',
        build_context: 'app',
        build_args: { A: '1' },
        target: 'run',
        platforms: ['linux/amd64', 'linux/arm64'],
        cache: true,
        secrets: { npm: SECRET_VALUE },
      },
      { tags: ['v1'] },
    );

    const translation = buildx.jobSpec(spec, { ...jobContext, credentialsSecret: 'push' });

    expect(translation).toEqual({
      kind: 'job',
      notes: stepsOffNotes(spec),
      secretKeys: ['build-secret.npm'],
      configMap: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `kiln-${BUILD_ID}`, namespace: 'kiln-builds', labels: LABELS },
        immutable: true,
        data: { Dockerfile: DOCKERFILE },
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
              // fsGroup: the 0400 Secret files are readable by the builder's group.
              securityContext: { fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
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
                  resources: {
                    requests: { cpu: '100m', memory: '128Mi', 'ephemeral-storage': '256Mi' },
                    limits: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '1Gi' },
                  },
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
                  image: BUILDKIT_IMAGE,
                  imagePullPolicy: 'IfNotPresent',
                  // The daemonless script: one buildkitd per build, in the build's pod.
                  command: ['buildctl-daemonless.sh'],
                  args: [
                    'build',
                    '--frontend=dockerfile.v0',
                    '--local=context=/workspace/source/app',
                    ...INLINE,
                    '--opt=target=run',
                    '--opt=build-arg:CI=true',
                    '--opt=build-arg:A=1',
                    '--opt=platform=linux/amd64,linux/arm64',
                    '--secret=id=npm,src=/kiln/build-secrets/build-secret.npm',
                    '--import-cache=type=registry,ref=harbor.example.com/team/app/cache:buildcache',
                    '--export-cache=type=registry,ref=harbor.example.com/team/app/cache:buildcache,mode=max',
                    ...pushed('name=harbor.example.com/team/app:v1'),
                  ],
                  env: [
                    { name: 'BUILDKITD_FLAGS', value: '--oci-worker-no-process-sandbox' },
                    { name: 'XDG_RUNTIME_DIR', value: '/home/user/.local/tmp' },
                    { name: 'DOCKER_CONFIG', value: '/home/user/.docker' },
                  ],
                  resources: {
                    requests: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '2Gi' },
                    limits: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '10Gi' },
                  },
                  // Rootless BuildKit's securityContext (job.rootless.yaml, Shipwright).
                  securityContext: {
                    runAsUser: 1000,
                    runAsGroup: 1000,
                    runAsNonRoot: true,
                    privileged: false,
                    allowPrivilegeEscalation: true,
                    seccompProfile: { type: 'Unconfined' },
                    appArmorProfile: { type: 'Unconfined' },
                  },
                  terminationMessagePolicy: 'FallbackToLogsOnError',
                  volumeMounts: [
                    { name: 'workspace', mountPath: '/workspace' },
                    { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
                    {
                      name: 'registry-credentials',
                      mountPath: '/home/user/.docker',
                      readOnly: true,
                    },
                    { name: 'build-secrets', mountPath: '/kiln/build-secrets', readOnly: true },
                    OUT_MOUNT,
                    ...SCRATCH_MOUNTS,
                  ],
                },
              ],
              volumes: [
                ...CHECKOUT_VOLUMES,
                CONFIGMAP_VOLUME,
                {
                  name: 'registry-credentials',
                  secret: {
                    secretName: 'push',
                    items: [{ key: '.dockerconfigjson', path: 'config.json' }],
                    defaultMode: 0o400,
                  },
                },
                {
                  name: 'build-secrets',
                  secret: {
                    secretName: `kiln-${BUILD_ID}`,
                    items: [{ key: 'build-secret.npm', path: 'build-secret.npm' }],
                    defaultMode: 0o400,
                  },
                },
                OUT_VOLUME,
                ...SCRATCH_VOLUMES,
              ],
            },
          },
        },
      },
    });
  });

  it('returns plain JSON: the object survives a JSON round trip unchanged', () => {
    const translation = buildx.jobSpec(
      wizard({ registry_repository: 'reg.io/a/b', secrets: { npm: SECRET_VALUE } }),
      jobContext,
    );

    expect(JSON.parse(JSON.stringify(translation))).toEqual(translation);
  });

  it.each<{
    name: string;
    spec: BuildSpec;
    context?: Partial<JobContext>;
    args: string[];
    volumes: object[];
    mounts: object[];
    notes?: string[];
    secretKeys?: string[];
  }>([
    {
      name: 'a build without a repository: the ConfigMap alone is the context, no checkout',
      spec: wizard({ registry_repository: 'reg.io/team/app' }, {}, withoutRepository),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--opt=build-arg:CI=true',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'a build arg with spaces and shell metacharacters stays one argv element',
      spec: wizard(
        { registry_repository: 'reg.io/team/app', build_args: { MSG: SHELL_BAIT } },
        {},
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--opt=build-arg:CI=true',
        `--opt=build-arg:MSG=${SHELL_BAIT}`,
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'three platforms: one --opt=platform, one image index',
      spec: wizard(
        {
          registry_repository: 'reg.io/team/app',
          platforms: ['linux/amd64', 'linux/arm64/v8', 'linux/s390x'],
        },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--opt=platform=linux/amd64,linux/arm64/v8,linux/s390x',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'the registry cache in the named cache repository, tagged buildcache',
      spec: wizard(
        { registry_repository: 'reg.io/team/app', cache: true, cache_repo: 'reg.io/team/cache' },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--import-cache=type=registry,ref=reg.io/team/cache:buildcache',
        '--export-cache=type=registry,ref=reg.io/team/cache:buildcache,mode=max',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'cache_to names the export, cache_from adds imports, in either spelling',
      spec: wizard(
        {
          registry_repository: 'reg.io/team/app',
          cache: true,
          cache_to: 'type=registry,ref=reg.io/team/ci-cache:main',
          cache_from: ['reg.io/team/ci-cache:main', 'type=registry,ref=reg.io/team/old:cache'],
        },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--import-cache=type=registry,ref=reg.io/team/app/cache:buildcache',
        '--import-cache=type=registry,ref=reg.io/team/ci-cache:main',
        '--import-cache=type=registry,ref=reg.io/team/old:cache',
        '--export-cache=type=registry,ref=reg.io/team/ci-cache:main,mode=max',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'cache_to with BuildKit’s mode=min: the export keeps the mode asked for',
      spec: wizard(
        {
          registry_repository: 'reg.io/team/app',
          cache: true,
          cache_to: 'type=registry,ref=reg.io/team/ci-cache:main,mode=min',
          cache_from: ['reg.io/team/ci-cache:main', 'type=registry,ref=reg.io/team/old:cache'],
        },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--import-cache=type=registry,ref=reg.io/team/app/cache:buildcache',
        '--import-cache=type=registry,ref=reg.io/team/ci-cache:main',
        '--import-cache=type=registry,ref=reg.io/team/old:cache',
        '--export-cache=type=registry,ref=reg.io/team/ci-cache:main,mode=min',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'cache_from alone imports without exporting',
      spec: wizard(
        { registry_repository: 'reg.io/team/app', cache_from: ['reg.io/team/app:v0'] },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--import-cache=type=registry,ref=reg.io/team/app:v0',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'secrets: a --secret per id, read from the build Secret mounted as files',
      spec: wizard(
        {
          registry_repository: 'reg.io/team/app',
          secrets: { npm: SECRET_VALUE, 'pip.conf_v2': 'other' },
        },
        { environment: {} },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--secret=id=npm,src=/kiln/build-secrets/build-secret.npm',
        '--secret=id=pip.conf_v2,src=/kiln/build-secrets/build-secret.pip.conf_v2',
        ...pushed('name=reg.io/team/app:v1'),
      ],
      volumes: [
        CONFIGMAP_VOLUME,
        {
          name: 'build-secrets',
          secret: {
            secretName: `kiln-${BUILD_ID}`,
            items: [
              { key: 'build-secret.npm', path: 'build-secret.npm' },
              { key: 'build-secret.pip.conf_v2', path: 'build-secret.pip.conf_v2' },
            ],
            defaultMode: 0o400,
          },
        },
        OUT_VOLUME,
        ...SCRATCH_VOLUMES,
      ],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        { name: 'build-secrets', mountPath: '/kiln/build-secrets', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
      secretKeys: ['build-secret.npm', 'build-secret.pip.conf_v2'],
    },
    {
      name: "several tags: one image output, its name CSV-quoted (BuildKit's README)",
      spec: wizard(
        { registry_repository: 'reg.io/team/app' },
        { environment: {}, tags: ['v1', 'latest', 'other.io/x/y:2'] },
        withoutRepository,
      ),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        ...pushed('"name=reg.io/team/app:v1,reg.io/team/app:latest,other.io/x/y:2"'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
    {
      name: 'no registry at all: no image output and no metadata file, with a note',
      spec: wizard({ cache: true }, { environment: {} }, withoutRegistry),
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/workspace/source',
        ...INLINE,
        '--progress=plain',
      ],
      volumes: [...CHECKOUT_VOLUMES, CONFIGMAP_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        ...SCRATCH_MOUNTS,
      ],
      notes: [
        'the layer cache is off: no cache_repo and no registry repository to keep it in',
        'no registry is configured for this build, so the image is built but not pushed (BuildKit without an image output)',
      ],
    },
    {
      name: 'insecure registries: registry.insecure=true on the push and the cache there only',
      spec: wizard(
        {
          registry_repository: '127.0.0.1:5000/team/app',
          cache: true,
          cache_from: ['reg.io/team/app:v0'],
        },
        { environment: {} },
        withoutRepository,
      ),
      context: { settings: { ...DEFAULT_JOB_SETTINGS, insecureRegistries: ['127.0.0.1:5000'] } },
      args: [
        'build',
        '--frontend=dockerfile.v0',
        '--local=context=/kiln/dockerfile',
        ...INLINE,
        '--import-cache=type=registry,ref=127.0.0.1:5000/team/app/cache:buildcache,registry.insecure=true',
        '--import-cache=type=registry,ref=reg.io/team/app:v0',
        '--export-cache=type=registry,ref=127.0.0.1:5000/team/app/cache:buildcache,mode=max,registry.insecure=true',
        ...pushed('name=127.0.0.1:5000/team/app:v1', ',registry.insecure=true'),
      ],
      volumes: [CONFIGMAP_VOLUME, OUT_VOLUME, ...SCRATCH_VOLUMES],
      mounts: [
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        OUT_MOUNT,
        ...SCRATCH_MOUNTS,
      ],
    },
  ])('$name', ({ spec, context, args, volumes, mounts, notes = [], secretKeys }) => {
    const translation = buildx.jobSpec(spec, { ...jobContext, ...context });
    const job = jobOfTranslation(translation);
    const builder = builderOf(job);

    expect(builder.args).toEqual(args);
    expect(job.spec?.template.spec?.volumes).toEqual(volumes);
    expect(builder.volumeMounts).toEqual(mounts);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      ...notes,
      ...stepsOffNotes(spec),
    ]);
    expect(translation.kind === 'job' && translation.secretKeys).toEqual(secretKeys);
    expect(translation.kind === 'job' && translation.configMap?.data).toEqual({
      Dockerfile: DOCKERFILE,
    });
    expect(builder.image).toBe(BUILDKIT_IMAGE);
    expect(builder.securityContext).toEqual(BUILDKIT_SECURITY_CONTEXT);
  });

  it('registry_type s3: the OCI exporter writes the layout tarball for s3-upload, every platform, nothing pushed', () => {
    const spec = wizard(
      {
        registry_type: 's3',
        registry_repository: 'reg.io/team/app',
        platforms: ['linux/amd64', 'linux/arm64'],
      },
      { environment: {} },
    );
    const kilnImage = `registry.example.com/kiln@sha256:${'5'.repeat(64)}`;

    const translation = buildx.jobSpec(spec, {
      ...jobContext,
      settings: { ...DEFAULT_JOB_SETTINGS, steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage } },
      s3: { bucket: 'kiln-images', region: 'eu-west-1', credentials: true },
    });

    const job = jobOfTranslation(translation);
    const pod = job.spec!.template.spec!;
    const builder = pod.initContainers!.find((c) => c.name === 'build')!;
    expect(builder.args).toEqual([
      'build',
      '--frontend=dockerfile.v0',
      '--local=context=/workspace/source',
      ...INLINE,
      '--opt=platform=linux/amd64,linux/arm64',
      '--output=type=oci,dest=/kiln/out/image.oci.tar',
      '--progress=plain',
    ]);
    expect(builder.volumeMounts).toContainEqual(OUT_MOUNT);
    expect(pod.containers.map((c) => [c.name, c.image, c.args])).toEqual([
      ['s3-upload', kilnImage, ['s3-upload', 'oci-tar', 'image.oci.tar']],
    ]);
    expect(translation.kind === 'job' && translation.secretKeys).toEqual([
      's3.access-key-id',
      's3.secret-access-key',
    ]);
    expect(hardeningProblems(job)).toEqual([]);
  });

  it("builds the repository's own Dockerfile from the checkout, with no ConfigMap", () => {
    const spec = wizard({ registry_repository: 'reg.io/team/app' }, { environment: {} });
    const plan = { ...dockerfilePlan(spec, undefined, {}), dockerfilePath: 'Dockerfile' };

    const translation = buildxJob(spec, jobContext, plan);
    const builder = builderOf(jobOfTranslation(translation));

    expect(builder.args?.slice(0, 5)).toEqual([
      'build',
      '--frontend=dockerfile.v0',
      '--local=context=/workspace/source',
      '--local=dockerfile=/workspace/source',
      '--opt=filename=Dockerfile',
    ]);
    expect(translation.kind === 'job' && translation.configMap).toBeUndefined();
  });

  it.each<[string, BuildSpec, Partial<JobContext>, string]>([
    [
      'a secret id that could name another file',
      wizard({ registry_repository: 'reg.io/a/b', secrets: { '../token': 'x' } }),
      {},
      'buildx secret id "../token" cannot be mounted: ids are 1 to 200 letters, digits, ".", "_" or "-"',
    ],
    [
      'a secret id that would add a field to --secret',
      wizard({ registry_repository: 'reg.io/a/b', secrets: { 'a,src/etc/passwd': 'x' } }),
      {},
      'buildx secret id "a,src/etc/passwd" cannot be mounted: ids are 1 to 200 letters, digits, ".", "_" or "-"',
    ],
    [
      'secrets without a build Secret to mount them from',
      wizard({ registry_repository: 'reg.io/a/b', secrets: { npm: SECRET_VALUE } }),
      { buildSecretName: undefined },
      'this build has secrets, but the operator gave it no build Secret to mount them from',
    ],
    [
      'a cache export of another type, which would write outside the registry',
      wizard({ registry_repository: 'reg.io/a/b', cache_to: 'type=local,dest=/kiln/out' }),
      {},
      'cache_to "type=local,dest=/kiln/out" is not a registry cache: give an image reference or type=registry,ref=<reference>[,mode=min|max]',
    ],
    [
      'a cache import that adds attributes',
      wizard({ registry_repository: 'reg.io/a/b', cache_from: ['reg.io/a/b:c,mode=max'] }),
      {},
      'cache_from "reg.io/a/b:c,mode=max" is not a registry cache: give an image reference or type=registry,ref=<reference>[,mode=min|max]',
    ],
    [
      'a build context outside the checkout',
      wizard({ registry_repository: 'reg.io/a/b', build_context: '../../etc' }),
      {},
      'build context ../../etc is outside the source',
    ],
  ])('refuses %s, with the reason', (_name, spec, context, reason) => {
    expect(buildx.jobSpec(spec, { ...jobContext, ...context })).toEqual({
      kind: 'unsupported',
      reason,
    });
  });

  it("refuses the repository's Dockerfile when there is no repository", () => {
    const spec = wizard({ registry_repository: 'reg.io/a/b' }, {}, withoutRepository);

    expect(buildxJob(spec, jobContext, dockerfilePlan(spec, undefined, {}))).toEqual({
      kind: 'unsupported',
      reason: 'the project has no git repository to build from',
    });
  });
});

describe('every buildx Job', () => {
  const user = { arg: SHELL_BAIT, secret: SECRET_VALUE };
  const cases: Array<[string, BuildSpec, Partial<JobContext>]> = [
    [
      'a full build',
      wizard({
        registry_repository: 'reg.io/team/app',
        build_args: { X: user.arg },
        platforms: ['linux/amd64', 'linux/arm64'],
        cache: true,
        secrets: { npm: user.secret, second: `${user.secret}-2` },
      }),
      { credentialsSecret: 'push', settings: { ...DEFAULT_JOB_SETTINGS, serviceAccountName: 'b' } },
    ],
    [
      'a build without a repository',
      wizard({ registry_repository: 'reg.io/a/b' }, {}, withoutRepository),
      {},
    ],
    ['an unpushed build', wizard({ secrets: { npm: user.secret } }, {}, withoutRegistry), {}],
  ];

  it.each(cases)('%s keeps the hardening rules', (_name, spec, context) => {
    const job = jobOfTranslation(buildx.jobSpec(spec, { ...jobContext, ...context }));

    expect(hardeningProblems(job)).toEqual([]);
    for (const container of containersOf(job)) {
      expect(container.image).toMatch(/@sha256:[0-9a-f]{64}$/);
      expect(container.securityContext?.privileged).toBe(false);
    }
  });

  it.each(cases)(
    '%s never carries a secret value, in the Job or the ConfigMap',
    (_n, spec, ctx) => {
      const translation = buildx.jobSpec(spec, { ...jobContext, ...ctx });
      const text = JSON.stringify(translation);

      expect(translation.kind).toBe('job');
      expect(text).not.toContain(user.secret);
      // Nor in another encoding the API server would decode.
      expect(text).not.toContain(Buffer.from(user.secret).toString('base64'));
      for (const container of containersOf(jobOfTranslation(translation))) {
        for (const env of container.env ?? []) expect(env.value ?? '').not.toContain(user.secret);
      }
    },
  );

  it.each(cases)('%s passes user text to no shell script', (_name, spec, context) => {
    const job = jobOfTranslation(buildx.jobSpec(spec, { ...jobContext, ...context }));

    for (const container of containersOf(job)) {
      const argv = [...(container.command ?? []), ...(container.args ?? [])];
      const script = argv.indexOf('-c') === -1 ? undefined : argv[argv.indexOf('-c') + 1];
      if (script === undefined) continue;
      expect(script).toBe(SOURCE_SCRIPT);
      expect(script).not.toContain(user.arg);
    }
    expect(builderOf(job).command).toEqual(['buildctl-daemonless.sh']);
  });

  it.each(cases)(
    '%s needs the documented Pod Security level, privileged, for the builder alone',
    (_name, spec, context) => {
      const job = jobOfTranslation(buildx.jobSpec(spec, { ...jobContext, ...context }));
      const pod = JSON.parse(JSON.stringify(job.spec?.template.spec)) as PodSpec;
      const metadata = job.spec?.template.metadata ?? {};

      expect(POD_SECURITY_LEVEL).toBe('privileged');
      // Privileged admits any pod. Baseline refuses it for the builder's two Unconfined profiles
      // alone, so no lower level will do:
      expect(baselineViolations(pod, metadata)).toEqual([
        'container build: AppArmor Unconfined',
        'container build: seccomp Unconfined',
      ]);
      expect(restrictedViolations(pod, metadata)).toEqual([
        'container build: AppArmor Unconfined',
        'container build: allowPrivilegeEscalation != false',
        'container build: seccomp Unconfined',
        'container build: capabilities drop ALL',
      ]);
    },
  );
});
