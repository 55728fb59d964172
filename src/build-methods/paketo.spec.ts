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
import { type PodSpec, restrictedViolations } from '../../test/support/pod-security.js';
import type { V1Container, V1Job } from '@kubernetes/client-node';

import type { BuildSpec, SpecContext } from '../manifest/build-spec.js';
import {
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  type JobTranslation,
  SOURCE_SCRIPT,
} from './job.js';
import {
  CNB_SECURITY_CONTEXT,
  paketo,
  PLATFORM_ENV_BLOCKLIST,
  POD_SECURITY_LEVEL,
} from './paketo.js';

/*
 * Every expected flag is the CNB lifecycle creator's, as the lifecycle's cmd/lifecycle/creator.go
 * defines them: -app -layers -platform -order -run-image -cache-image -insecure-registry
 * (Platform API ≥ 0.13) -tag -report -no-color and the positional <image>. Env: CNB_PLATFORM_API
 * (Shipwright's 0.13), CNB_USER_ID/CNB_GROUP_ID (the Jammy stacks' 1001/1000), DOCKER_CONFIG (as
 * the Tekton catalog's task sets it). Build-time env: files /platform/env/<NAME>, as Shipwright's
 * buildpacks strategy writes them.
 */

const JAMMY_BASE = 'paketobuildpacks/builder-jammy-base:latest';
/** A builder named by digest; the digest is made up, the Job only looks at its shape. */
const PINNED_BUILDER = `paketobuildpacks/builder-jammy-base:0.4.635@sha256:${'ab'.repeat(32)}`;
const SHELL_BAIT = 'a b; rm -rf / && echo "$HOME" `id` $(id) | cat > /x \'q\' \\n';

/** The lifecycle's directories: the checkout as the app, emptyDir layers, /platform. */
const DIRS = ['-app=/workspace/source', '-layers=/layers', '-platform=/platform'];
/** What every Job ends with: the report (digest) for the steps, plain logs, the image. */
const END = (image: string): string[] => ['-report=/kiln/out/report.toml', '-no-color', image];
const unpinned = (image: string): string =>
  `the builder image ${image} is not pinned by digest: the build runs whatever its tag names when the node pulls it`;

const CHECKOUT_VOLUMES = [
  { name: 'workspace', emptyDir: {} },
  { name: 'source-tmp', emptyDir: {} },
];
const CONFIGMAP_VOLUME = {
  name: 'dockerfile',
  configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 },
};
const LIFECYCLE_VOLUMES = [
  { name: 'kiln-out', emptyDir: {} },
  { name: 'layers', emptyDir: {} },
];
const WORKSPACE_MOUNT = { name: 'workspace', mountPath: '/workspace' };
const FILES_MOUNT = { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true };
const LIFECYCLE_MOUNTS = [
  { name: 'kiln-out', mountPath: '/kiln/out' },
  { name: 'layers', mountPath: '/layers' },
];
const envFile = (name: string) => ({
  name: 'dockerfile',
  mountPath: `/platform/env/${name}`,
  subPath: name,
  readOnly: true,
});

/** A wizard paketo build, through the same validation the API runs (environment CI=true). */
function wizard(
  paketoConfig: Record<string, unknown>,
  buildConfig: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return manifestSpec(
    ctx,
    'paketo',
    { paketo_config: { builder: JAMMY_BASE, ...paketoConfig }, ...buildConfig },
    extra,
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

describe('paketo.jobSpec', () => {
  it('runs a wizard build through the lifecycle creator: every field of the manifest in the Job', () => {
    const spec = wizard(
      {
        builder: 'paketobuildpacks/builder:base',
        buildpacks: ['paketo-buildpacks/nodejs@1.2.3', 'paketo-buildpacks/procfile'],
        env: { BP_NODE_VERSION: '20' },
        build_args: { NODE_ENV: 'production' },
      },
      { registry_repository: 'harbor.example.com/team/app', cache: true, build_context: 'web' },
    );

    const translation = paketo.jobSpec(spec, { ...jobContext, credentialsSecret: 'push' });

    expect(translation).toEqual({
      kind: 'job',
      notes: [
        'the deprecated builder paketobuildpacks/builder:base is replaced by paketobuildpacks/builder-jammy-base:latest, its maintained Jammy successor',
        unpinned('paketobuildpacks/builder-jammy-base:latest'),
        'buildpacks take no build arguments: paketo_config.build_args are given to them as platform environment variables (/platform/env)',
        ...stepsOffNotes(spec),
      ],
      configMap: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `kiln-${BUILD_ID}`, namespace: 'kiln-builds', labels: LABELS },
        immutable: true,
        data: {
          CI: 'true',
          BP_NODE_VERSION: '20',
          NODE_ENV: 'production',
          'order.toml': [
            '[[order]]',
            '',
            '  [[order.group]]',
            '    id = "paketo-buildpacks/nodejs"',
            '    version = "1.2.3"',
            '',
            '  [[order.group]]',
            '    id = "paketo-buildpacks/procfile"',
            '',
          ].join('\n'),
        },
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
              // Restricted, as kpack's build pod: the builder's uid/gid, fsGroup, non-root.
              securityContext: {
                runAsUser: 1001,
                runAsGroup: 1000,
                fsGroup: 1000,
                runAsNonRoot: true,
                seccompProfile: { type: 'RuntimeDefault' },
              },
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
                  // Cloned as the lifecycle's user: the checkout is the lifecycle's to write in.
                  securityContext: {
                    runAsUser: 1001,
                    runAsGroup: 1000,
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
                  image: 'paketobuildpacks/builder-jammy-base:latest',
                  imagePullPolicy: 'IfNotPresent',
                  command: ['/cnb/lifecycle/creator'],
                  args: [
                    '-app=/workspace/source/web',
                    '-layers=/layers',
                    '-platform=/platform',
                    // -buildpacks names a directory: explicit buildpacks are an order.
                    '-order=/kiln/dockerfile/order.toml',
                    '-cache-image=harbor.example.com/team/app/cache:paketo-cache',
                    ...END('harbor.example.com/team/app:v1'),
                  ],
                  env: [
                    { name: 'CNB_PLATFORM_API', value: '0.13' },
                    { name: 'CNB_USER_ID', value: '1001' },
                    { name: 'CNB_GROUP_ID', value: '1000' },
                    { name: 'DOCKER_CONFIG', value: '/home/cnb/.docker' },
                  ],
                  resources: {
                    requests: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '2Gi' },
                    limits: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '10Gi' },
                  },
                  securityContext: {
                    runAsUser: 1001,
                    runAsGroup: 1000,
                    runAsNonRoot: true,
                    privileged: false,
                    allowPrivilegeEscalation: false,
                    capabilities: { drop: ['ALL'] },
                  },
                  terminationMessagePolicy: 'FallbackToLogsOnError',
                  volumeMounts: [
                    WORKSPACE_MOUNT,
                    FILES_MOUNT,
                    envFile('CI'),
                    envFile('BP_NODE_VERSION'),
                    envFile('NODE_ENV'),
                    {
                      name: 'registry-credentials',
                      mountPath: '/home/cnb/.docker',
                      readOnly: true,
                    },
                    ...LIFECYCLE_MOUNTS,
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
                ...LIFECYCLE_VOLUMES,
              ],
            },
          },
        },
      },
    });
  });

  it('returns plain JSON: the object survives a JSON round trip unchanged', () => {
    const translation = paketo.jobSpec(wizard({ buildpacks: ['a/b'] }), jobContext);

    expect(JSON.parse(JSON.stringify(translation))).toEqual(translation);
  });

  it.each<{
    name: string;
    spec: BuildSpec;
    context?: Partial<JobContext>;
    args: string[];
    volumes: object[];
    mounts: object[];
    configMap?: Record<string, string>;
    notes?: string[];
  }>([
    {
      name: 'a build of the checkout with no environment: no ConfigMap, the builder as chosen',
      spec: wizard({}, {}, { environment: {} }),
      args: [...DIRS, ...END('127.0.0.1:5000/kiln/my-web:v1')],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
      notes: [unpinned(JAMMY_BASE)],
    },
    {
      name: 'a builder pinned by digest: no note',
      spec: wizard({ builder: PINNED_BUILDER }, {}, { environment: {} }),
      args: [...DIRS, ...END('127.0.0.1:5000/kiln/my-web:v1')],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
    },
    {
      name: 'the environment as one platform env file per variable, values verbatim',
      spec: wizard({ env: { MSG: SHELL_BAIT, CI: 'false' } }),
      args: [...DIRS, ...END('127.0.0.1:5000/kiln/my-web:v1')],
      volumes: [...CHECKOUT_VOLUMES, CONFIGMAP_VOLUME, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, FILES_MOUNT, envFile('CI'), envFile('MSG'), ...LIFECYCLE_MOUNTS],
      configMap: { CI: 'false', MSG: SHELL_BAIT },
      notes: [unpinned(JAMMY_BASE)],
    },
    {
      name: "Shipwright's blocklist: PATH, HOME and the shell's own variables are left out, with a note",
      spec: wizard(
        { env: { PATH: '/evil', HOME: '/x', BP_X: '1' } },
        {},
        { environment: { _: 'u', SHLVL: '9' } },
      ),
      args: [...DIRS, ...END('127.0.0.1:5000/kiln/my-web:v1')],
      volumes: [...CHECKOUT_VOLUMES, CONFIGMAP_VOLUME, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, FILES_MOUNT, envFile('BP_X'), ...LIFECYCLE_MOUNTS],
      configMap: { BP_X: '1' },
      notes: [
        unpinned(JAMMY_BASE),
        "not given to the buildpacks, since the build's own shell sets them: _, SHLVL, PATH, HOME",
      ],
    },
    {
      name: 'build_config.build_args: not used, and said so',
      spec: wizard({}, { build_args: { A: '1' } }, { environment: {} }),
      args: [...DIRS, ...END('127.0.0.1:5000/kiln/my-web:v1')],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
      notes: [
        unpinned(JAMMY_BASE),
        'build_config.build_args are not used by paketo builds; paketo_config.build_args are',
      ],
    },
    {
      name: "buildpacks by id, id@version or pack's urn: an order of the builder's buildpacks",
      spec: wizard(
        { builder: PINNED_BUILDER, buildpacks: ['urn:cnb:builder:paketo-buildpacks/go', 'x/y@2'] },
        {},
        { environment: {} },
      ),
      args: [
        ...DIRS,
        '-order=/kiln/dockerfile/order.toml',
        ...END('127.0.0.1:5000/kiln/my-web:v1'),
      ],
      volumes: [...CHECKOUT_VOLUMES, CONFIGMAP_VOLUME, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, FILES_MOUNT, ...LIFECYCLE_MOUNTS],
      configMap: {
        'order.toml':
          '[[order]]\n\n  [[order.group]]\n    id = "paketo-buildpacks/go"\n\n  [[order.group]]\n    id = "x/y"\n    version = "2"\n',
      },
    },
    {
      name: 'the cache image in the named cache repository',
      spec: wizard(
        { builder: PINNED_BUILDER },
        { cache: true, cache_repo: 'reg.io/team/cnb-cache' },
        { environment: {} },
      ),
      args: [
        ...DIRS,
        '-cache-image=reg.io/team/cnb-cache:paketo-cache',
        ...END('127.0.0.1:5000/kiln/my-web:v1'),
      ],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
    },
    {
      name: "several tags (bare ones under the full tag's repository): the first is the image, the others -tag",
      spec: wizard(
        { builder: PINNED_BUILDER },
        {},
        { environment: {}, tags: ['v1', 'latest', 'other.io/x/y:2'] },
      ),
      args: [...DIRS, '-tag=other.io/x/y:latest', '-tag=other.io/x/y:2', ...END('other.io/x/y:v1')],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
    },
    {
      name: "insecure registries and the operator's run image for this builder",
      spec: wizard({ builder: PINNED_BUILDER }, {}, { environment: {} }),
      context: {
        settings: {
          ...DEFAULT_JOB_SETTINGS,
          insecureRegistries: ['127.0.0.1:5000'],
          paketoRunImages: {
            [PINNED_BUILDER]: 'mirror.example.com/paketo/run-jammy-base:latest',
            [JAMMY_BASE]: 'mirror.example.com/other:1',
          },
        },
      },
      args: [
        ...DIRS,
        '-run-image=mirror.example.com/paketo/run-jammy-base:latest',
        '-insecure-registry=127.0.0.1:5000',
        ...END('127.0.0.1:5000/kiln/my-web:v1'),
      ],
      volumes: [...CHECKOUT_VOLUMES, ...LIFECYCLE_VOLUMES],
      mounts: [WORKSPACE_MOUNT, ...LIFECYCLE_MOUNTS],
    },
  ])('$name', ({ spec, context, args, volumes, mounts, configMap, notes = [] }) => {
    const translation = paketo.jobSpec(spec, { ...jobContext, ...context });
    const job = jobOfTranslation(translation);
    const builder = builderOf(job);

    expect(builder.args).toEqual(args);
    expect(job.spec?.template.spec?.volumes).toEqual(volumes);
    expect(builder.volumeMounts).toEqual(mounts);
    expect(translation.kind === 'job' && translation.configMap?.data).toEqual(configMap);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      ...notes,
      ...stepsOffNotes(spec),
    ]);
    expect(translation.kind === 'job' && translation.secretKeys).toBeUndefined();
    expect(builder.command).toEqual(['/cnb/lifecycle/creator']);
    expect(builder.securityContext).toEqual(CNB_SECURITY_CONTEXT);
  });

  it('refuses registry_type s3: the lifecycle exports to a registry, not to an OCI layout kiln uploads', () => {
    const spec = wizard({}, { registry_type: 's3' });

    expect(
      paketo.jobSpec(spec, {
        ...jobContext,
        s3: { bucket: 'kiln-images', region: 'eu-west-1', credentials: true },
      }),
    ).toEqual({
      kind: 'unsupported',
      reason:
        'paketo builds cannot use registry_type s3: the buildpacks lifecycle exports its image to a registry, and kiln uploads only an OCI image layout to S3',
    });
  });

  it('leaves out every name of the blocklist', () => {
    const env = Object.fromEntries(PLATFORM_ENV_BLOCKLIST.map((name) => [name, 'x']));
    const translation = paketo.jobSpec(wizard({ env }, {}, { environment: {} }), jobContext);

    expect(translation.kind === 'job' && translation.configMap).toBeUndefined();
    expect(PLATFORM_ENV_BLOCKLIST).toEqual(['PATH', 'HOSTNAME', 'PWD', '_', 'SHLVL', 'HOME']);
  });

  it.each<[string, BuildSpec, string]>([
    [
      'a build without a repository, which has no app to build',
      wizard({}, {}, {}, withoutRepository),
      'the project has no git repository to build from',
    ],
    [
      'a build with no registry to export to',
      wizard({}, {}, {}, withoutRegistry),
      'no registry is configured for this build: the buildpacks lifecycle exports its image to a registry',
    ],
    [
      'an environment name that cannot be a file of /platform/env',
      wizard({ env: { '../../cnb/x': '1' } }),
      'environment variable "../../cnb/x" cannot be given to buildpacks: a name is letters, digits and "_", not starting with a digit',
    ],
    [
      'a buildpack given as an image, which the lifecycle cannot fetch',
      wizard({ buildpacks: ['docker://gcr.io/paketo-buildpacks/nodejs:1.0'] }),
      'buildpack "docker://gcr.io/paketo-buildpacks/nodejs:1.0" cannot run on Kubernetes: name a buildpack of the builder by id or id@version',
    ],
    [
      'an app directory outside the checkout',
      wizard({}, { build_context: '../..' }),
      'build context ../.. is outside the source',
    ],
  ])('refuses %s, with the reason', (_name, spec, reason) => {
    expect(paketo.jobSpec(spec, jobContext)).toEqual({ kind: 'unsupported', reason });
  });
});

describe('every paketo Job', () => {
  const user = { branch: 'feat/$(id)', value: SHELL_BAIT };
  const cases: Array<[string, BuildSpec, Partial<JobContext>]> = [
    [
      'a full build',
      wizard(
        {
          builder: PINNED_BUILDER,
          buildpacks: ['paketo-buildpacks/nodejs'],
          env: { X: user.value },
          build_args: { Y: user.value },
        },
        { cache: true },
      ),
      { credentialsSecret: 'push', settings: { ...DEFAULT_JOB_SETTINGS, serviceAccountName: 'b' } },
    ],
    ['a plain build', wizard({ builder: PINNED_BUILDER }, {}, { environment: {} }), {}],
  ];

  it.each(cases)('%s keeps the hardening rules', (_name, spec, context) => {
    const job = jobOfTranslation(paketo.jobSpec(spec, { ...jobContext, ...context }));

    expect(hardeningProblems(job)).toEqual([]);
  });

  it('names an unpinned builder as the one hardening rule it breaks', () => {
    const job = jobOfTranslation(paketo.jobSpec(wizard({}), jobContext));

    expect(hardeningProblems(job)).toEqual([
      `container build: image ${JAMMY_BASE} is not pinned by digest`,
    ]);
  });

  it.each(cases)('%s passes the documented Pod Security level, restricted', (_n, spec, ctx) => {
    const job = jobOfTranslation(paketo.jobSpec(spec, { ...jobContext, ...ctx }));
    const pod = JSON.parse(JSON.stringify(job.spec?.template.spec)) as PodSpec;

    expect(POD_SECURITY_LEVEL).toBe('restricted');
    expect(restrictedViolations(pod, job.spec?.template.metadata ?? {})).toEqual([]);
  });

  it.each(cases)(
    '%s clones the checkout as the user and group the lifecycle runs as',
    (_name, spec, context) => {
      const job = jobOfTranslation(paketo.jobSpec(spec, { ...jobContext, ...context }));
      const pod = job.spec?.template.spec;
      const builder = builderOf(job);
      const env = Object.fromEntries((builder.env ?? []).map((e) => [e.name, e.value]));
      const [source] = pod?.initContainers ?? [];

      // The lifecycle runs as CNB_USER_ID:CNB_GROUP_ID and writes into the app directory
      // (buildpacks install dependencies there): git, cloning as that user, makes it the owner.
      expect(builder.securityContext?.runAsUser).toBe(Number(env.CNB_USER_ID));
      expect(builder.securityContext?.runAsGroup).toBe(Number(env.CNB_GROUP_ID));
      expect(source?.securityContext?.runAsUser).toBe(Number(env.CNB_USER_ID));
      expect(source?.securityContext?.runAsGroup).toBe(Number(env.CNB_GROUP_ID));
      expect(pod?.securityContext?.fsGroup).toBe(Number(env.CNB_GROUP_ID));
      expect(builder.args?.[0]).toMatch(/^-app=\/workspace\/source(\/|$)/);
      expect(builder.volumeMounts).toContainEqual({ name: 'workspace', mountPath: '/workspace' });
    },
  );

  it.each(cases)('%s passes user text to no shell script', (_name, spec, context) => {
    const job = jobOfTranslation(paketo.jobSpec(spec, { ...jobContext, ...context }));

    for (const container of containersOf(job)) {
      const argv = [...(container.command ?? []), ...(container.args ?? [])];
      const script = argv.indexOf('-c') === -1 ? undefined : argv[argv.indexOf('-c') + 1];
      if (script === undefined) continue;
      expect(script).toBe(SOURCE_SCRIPT);
      expect(script).not.toContain(user.value);
    }
    // The environment's values are files, never the lifecycle's arguments or environment.
    const builder = builderOf(job);
    expect(JSON.stringify([builder.args, builder.env])).not.toContain('rm -rf');
  });
});
