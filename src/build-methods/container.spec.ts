import { REPOSITORY, stepsOffNotes } from '../../test/support/job-fixtures.js';
import { manifestSpec } from '../../test/support/build-specs.js';
import type { V1Container, V1Job } from '@kubernetes/client-node';

import type { BuildSpec, SpecContext } from '../manifest/build-spec.js';
import { container, containerfileFor } from './container.js';
import { KANIKO_IMAGE } from './images.js';
import {
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  type JobTranslation,
  SOURCE_SCRIPT,
} from './job.js';
import { KANIKO_SECURITY_CONTEXT } from './kaniko.js';

describe(containerfileFor.name, () => {
  it('starts from the base image, declares build-time variables, then the instructions in order', () => {
    expect(
      containerfileFor('docker.io/library/alpine:3.20', ['RUN echo $GREETING', 'CMD ["sh"]'], {
        GREETING: 'hi there',
      }),
    ).toBe(
      'FROM docker.io/library/alpine:3.20\nARG GREETING="hi there"\nRUN echo $GREETING\nCMD ["sh"]\n',
    );
  });

  it('quotes variable values so they cannot add instructions', () => {
    expect(containerfileFor('scratch', [], { X: 'a"\nRUN evil' })).toBe(
      'FROM scratch\nARG X="a\\"\\nRUN evil"\n',
    );
  });
});

const BUILD_ID = '9d2e4c6a-1b3f-4a5c-8d7e-0f1a2b3c4d5e';
const SHELL_BAIT = 'two words; $(id) `id` && | > "q" \'q\'';

const specContext: SpecContext = {
  project: { name: 'My Web', gitRepositoryUrl: REPOSITORY, defaultRegistry: null },
  defaultRegistry: '127.0.0.1:5000/kiln',
  timeoutSeconds: 1200,
};
const bare: SpecContext = {
  project: { ...specContext.project, gitRepositoryUrl: null },
  defaultRegistry: undefined,
  timeoutSeconds: 1200,
};

const jobContext: JobContext = {
  buildId: BUILD_ID,
  tenantId: '11111111-2222-4333-8444-555555555555',
  projectId: '66666666-7777-4888-9999-aaaaaaaaaaaa',
  buildNumber: 12,
  namespace: 'kiln-builds',
  settings: DEFAULT_JOB_SETTINGS,
  configMapName: `kiln-${BUILD_ID}`,
};

const FIXED_FLAGS = [
  '--snapshot-mode=redo',
  '--digest-file=/dev/termination-log',
  '--ignore-path=/product_uuid',
  '--log-format=text',
  '--log-timestamp=false',
];

/** A `container` build as kiln stores it, through the same validation the API runs. */
function containerSpec(
  buildConfig: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return manifestSpec(ctx, 'container', buildConfig, {
    base_image: 'docker.io/library/node:22-alpine',
    instructions: ['WORKDIR /app', 'COPY . .', 'RUN npm ci'],
    environment: { NODE_ENV: 'production', GREETING: 'hi there' },
    ...extra,
  });
}

function jobOfTranslation(translation: JobTranslation): V1Job {
  if (translation.kind !== 'job') throw new Error(`unsupported: ${translation.reason}`);
  return translation.job;
}

function containersOf(job: V1Job): V1Container[] {
  const pod = job.spec?.template.spec;
  return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])];
}

const CONTAINERFILE =
  'FROM docker.io/library/node:22-alpine\n' +
  'ARG NODE_ENV="production"\n' +
  'ARG GREETING="hi there"\n' +
  'WORKDIR /app\nCOPY . .\nRUN npm ci\n';

describe('container.jobSpec', () => {
  it.each<{
    name: string;
    spec: BuildSpec;
    args: string[];
    initContainers: Array<Pick<V1Container, 'name' | 'args'>> | undefined;
    mounts: object[];
    notes?: string[];
  }>([
    {
      name: 'kaniko builds the generated Containerfile; environment as ARG lines, build args as flags',
      spec: containerSpec({ registry_repository: 'reg.io/team/web', build_args: { A: '1' } }),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///workspace/source',
        '--destination=reg.io/team/web:v1',
        '--build-arg',
        'A=1',
        ...FIXED_FLAGS,
      ],
      initContainers: [{ name: 'source', args: [REPOSITORY, '', ''] }],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
      ],
    },
    {
      name: 'a build context inside the checkout, and a target stage',
      spec: containerSpec({
        registry_repository: 'reg.io/team/web',
        build_context: 'services/api',
        target: 'runtime',
      }),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///workspace/source/services/api',
        '--destination=reg.io/team/web:v1',
        '--target=runtime',
        ...FIXED_FLAGS,
      ],
      initContainers: [{ name: 'source', args: [REPOSITORY, '', ''] }],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
      ],
    },
    {
      name: 'no repository and no registry: the ConfigMap is the context and nothing is pushed',
      spec: containerSpec({}, {}, bare),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--no-push',
        ...FIXED_FLAGS,
      ],
      initContainers: undefined,
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      notes: [
        'no registry is configured for this build, so the image is built but not pushed (kaniko --no-push)',
      ],
    },
    {
      name: 'a cache with nowhere to keep it stays off, with a note',
      spec: containerSpec({ cache: true }, {}, bare),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///kiln/dockerfile',
        '--no-push',
        ...FIXED_FLAGS,
      ],
      initContainers: undefined,
      mounts: [{ name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true }],
      notes: [
        'no registry is configured for this build, so the image is built but not pushed (kaniko --no-push)',
        'the layer cache is off: no cache_repo and no registry repository to keep it in',
      ],
    },
    {
      name: 'a build arg with spaces and shell metacharacters stays one argv element',
      spec: containerSpec({
        registry_repository: 'reg.io/team/web',
        build_args: { B: SHELL_BAIT },
      }),
      args: [
        '--dockerfile=/kiln/dockerfile/Dockerfile',
        '--context=dir:///workspace/source',
        '--destination=reg.io/team/web:v1',
        '--build-arg',
        `B=${SHELL_BAIT}`,
        ...FIXED_FLAGS,
      ],
      initContainers: [{ name: 'source', args: [REPOSITORY, '', ''] }],
      mounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
      ],
    },
  ])('$name', ({ spec, args, initContainers, mounts, notes = [] }) => {
    const translation = container.jobSpec(spec, jobContext);
    const job = jobOfTranslation(translation);
    const pod = job.spec?.template.spec;
    const [builder] = pod?.containers ?? [];

    expect(builder?.image).toBe(KANIKO_IMAGE);
    expect(builder?.command).toEqual(['/kaniko/executor']);
    expect(builder?.args).toEqual(args);
    expect(builder?.volumeMounts).toEqual(mounts);
    expect(builder?.securityContext).toEqual(KANIKO_SECURITY_CONTEXT);
    expect(pod?.initContainers?.map(({ name, args }) => ({ name, args }))).toEqual(initContainers);
    expect(translation.kind === 'job' && translation.configMap).toEqual({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: `kiln-${BUILD_ID}`,
        namespace: 'kiln-builds',
        labels: job.metadata?.labels,
      },
      immutable: true,
      data: { Dockerfile: CONTAINERFILE },
    });
    expect(translation.kind === 'job' && translation.notes).toEqual([
      ...notes,
      ...stepsOffNotes(spec),
    ]);
    expect(job.metadata?.name).toBe(`kiln-${BUILD_ID}`);
    expect(job.spec?.activeDeadlineSeconds).toBe(1200);
  });

  it('registry_type s3: kaniko writes the generated image as an OCI layout directory for s3-upload', () => {
    const kilnImage = `registry.example.com/kiln@sha256:${'5'.repeat(64)}`;
    // No registry anywhere: an s3 build needs none.
    const spec = containerSpec({ registry_type: 's3' }, {}, bare);

    const translation = container.jobSpec(spec, {
      ...jobContext,
      buildSecretName: `kiln-${BUILD_ID}`,
      settings: { ...DEFAULT_JOB_SETTINGS, steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage } },
      s3: { bucket: 'kiln-images', prefix: 'ci', region: 'eu-west-1', credentials: true },
    });

    const job = jobOfTranslation(translation);
    const pod = job.spec!.template.spec!;
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['build']);
    expect(pod.initContainers?.[0]?.args).toEqual([
      '--dockerfile=/kiln/dockerfile/Dockerfile',
      '--context=dir:///kiln/dockerfile',
      '--no-push',
      '--oci-layout-path=/kiln/out/oci-layout',
      ...FIXED_FLAGS,
    ]);
    expect(pod.containers.map((c) => [c.name, c.image, c.args])).toEqual([
      ['s3-upload', kilnImage, ['s3-upload', 'oci-dir', 'oci-layout']],
    ]);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      'registry_type s3: the image is written as an OCI image layout and uploaded to s3://kiln-images/ci/ by the s3-upload step, not pushed to a registry',
      'the SBOM (syft) and scan (trivy) steps do not run for registry_type s3: they read the image from a registry, and this one goes to S3',
    ]);
    expect(hardeningProblems(job)).toEqual([]);
  });

  it('keeps the environment out of the build args (it is in the Containerfile)', () => {
    const job = jobOfTranslation(
      container.jobSpec(containerSpec({ registry_repository: 'reg.io/team/web' }), jobContext),
    );

    expect(job.spec?.template.spec?.containers[0]?.args).not.toContain('--build-arg');
  });

  describe('every container Job', () => {
    const cases: Array<[string, BuildSpec]> = [
      ['with a repository', containerSpec({ registry_repository: 'reg.io/team/web' })],
      ['without a repository or registry', containerSpec({ cache: true }, {}, bare)],
      [
        'with a hostile build arg',
        containerSpec({ registry_repository: 'reg.io/t/w', build_args: { B: SHELL_BAIT } }),
      ],
    ];

    it.each(cases)('%s keeps the hardening rules', (_name, spec) => {
      const job = jobOfTranslation(container.jobSpec(spec, jobContext));
      const pod = job.spec?.template.spec;

      expect(hardeningProblems(job)).toEqual([]);
      expect(job.spec?.backoffLimit).toBe(0);
      expect(job.spec?.ttlSecondsAfterFinished).toBeUndefined();
      expect(pod?.restartPolicy).toBe('Never');
      expect(pod?.automountServiceAccountToken).toBe(false);
      expect(Object.keys(pod ?? {}).filter((key) => key.startsWith('host'))).toEqual([]);
      for (const each of containersOf(job)) {
        expect(each.image).toMatch(/@sha256:[0-9a-f]{64}$/);
        expect(each.resources?.requests?.['ephemeral-storage']).toBeDefined();
        expect(each.resources?.limits?.['ephemeral-storage']).toBeDefined();
        expect(each.securityContext?.privileged).toBe(false);
        const argv = [...(each.command ?? []), ...(each.args ?? [])];
        const script = argv.includes('-c') ? argv[argv.indexOf('-c') + 1] : undefined;
        if (script !== undefined) {
          expect(script).toBe(SOURCE_SCRIPT);
          expect(script).not.toContain(SHELL_BAIT);
        }
      }
    });
  });
});
