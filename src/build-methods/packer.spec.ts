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
import { STEP_SECURITY_CONTEXT } from './steps.js';
import {
  packer,
  PACKER_IMAGE,
  PACKER_NOTES,
  PACKER_SECURITY_CONTEXT,
  POD_SECURITY_LEVEL,
} from './packer.js';

const REPOSITORY = 'https://git.example.com/images.git';
const BUILD_ID = '3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b';

const specContext: SpecContext = {
  project: { name: 'Images', gitRepositoryUrl: REPOSITORY, defaultRegistry: null },
  defaultRegistry: '127.0.0.1:5000/kiln',
  timeoutSeconds: 5400,
};
const withoutRepository: SpecContext = {
  ...specContext,
  project: { ...specContext.project, gitRepositoryUrl: null },
};
const withoutRegistry: SpecContext = { ...specContext, defaultRegistry: undefined };

const jobContext: JobContext = {
  buildId: BUILD_ID,
  tenantId: '11111111-2222-4333-8444-555555555555',
  projectId: '66666666-7777-4888-9999-aaaaaaaaaaaa',
  buildNumber: 7,
  namespace: 'kiln-builds',
  settings: DEFAULT_JOB_SETTINGS,
  configMapName: `kiln-${BUILD_ID}`,
};

const HCL_TEMPLATE = `packer {
  required_plugins {
    amazon = {
      version = ">= 1.3"
      source  = "github.com/hashicorp/amazon"
    }
  }
}

variable "region" {
  type = string
}

source "amazon-ebs" "base" {
  region = var.region
}

build {
  sources = ["source.amazon-ebs.base"]

  provisioner "shell" {
    script = "\${path.root}/scripts/setup.sh"
  }
}
`;
const JSON_TEMPLATE = JSON.stringify({
  variables: { region: '' },
  builders: [{ type: 'amazon-ebs', region: '{{user `region`}}' }],
  provisioners: [{ type: 'shell', script: 'scripts/setup.sh' }],
});

/** What kiln sets for packer, after the build's own variables. */
const PACKER_ENV = [
  { name: 'HOME', value: '/kiln/packer/home' },
  { name: 'PACKER_CONFIG_DIR', value: '/kiln/packer/home' },
  { name: 'PACKER_CACHE_DIR', value: '/kiln/packer/home/cache' },
  { name: 'PACKER_PLUGIN_PATH', value: '/kiln/packer/plugins' },
  { name: 'TMPDIR', value: '/tmp' },
  { name: 'CHECKPOINT_DISABLE', value: '1' },
  { name: 'PACKER_NO_COLOR', value: '1' },
];
const PACKER_VOLUMES = [
  { name: 'packer-home', emptyDir: {} },
  { name: 'packer-plugins', emptyDir: {} },
  { name: 'packer-tmp', emptyDir: {} },
];
const PACKER_MOUNTS = [
  { name: 'packer-home', mountPath: '/kiln/packer/home' },
  { name: 'packer-plugins', mountPath: '/kiln/packer/plugins' },
  { name: 'packer-tmp', mountPath: '/tmp' },
];
const BUILDER_RESOURCES = {
  requests: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '2Gi' },
  limits: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '10Gi' },
};

/**
 * The flags packer's documentation lists for each command:
 * `packer build -color=false -timestamp-ui -on-error=cleanup|… -var k=v …`,
 * `packer validate [-syntax-only] …`, `packer init <file>`.
 */
const DOCUMENTED_FLAGS: Record<string, RegExp> = {
  build:
    /^-(?:color=false|timestamp-ui|on-error=(?:cleanup|abort|ask|run-cleanup-provisioner)|var|var-file|force|parallel-builds=\d+|only=.+|except=.+|machine-readable)$/,
  validate: /^-(?:syntax-only|var|var-file)$/,
  init: /^$/,
};

/** jobOf's own line for a build that pushes nothing while it names SBOM and scan tools. */
const SKELETON_STEPS_NOTE = expect.stringMatching(/SBOM \(syft\).*scan \(trivy\)/);
/** Without kiln's step image, nothing reads packer's manifest. */
const NO_MANIFEST_STEP_NOTE =
  "packer's manifest is not read: the operator has no KILN_STEP_IMAGE, so provenance names no artifacts";
const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;
/** An operator that runs kiln's steps. */
const withSteps: Partial<JobContext> = {
  settings: {
    ...DEFAULT_JOB_SETTINGS,
    steps: { ...DEFAULT_JOB_SETTINGS.steps, kilnImage: STEP_IMAGE },
  },
};

const BIG_TEMPLATE = `# é\n${'#'.repeat(1_000_000)}\nsource "null" "x" {\n}\n`;

const SHELL_BAIT = 'a b; rm -rf / && echo "$HOME" `id` $(id) | cat > /x \'q\' \\n';

function specOf(
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  ctx: SpecContext = specContext,
): BuildSpec {
  return manifestSpec(ctx, 'packer', buildConfig, extra);
}

function jobOfTranslation(translation: JobTranslation): V1Job {
  if (translation.kind !== 'job') throw new Error(`unsupported: ${translation.reason}`);
  return translation.job;
}

/** The containers running packer (init, validate, then the builder), in order. */
function packerSteps(job: V1Job): V1Container[] {
  return containersOf(job).filter((container) => container.image === PACKER_IMAGE);
}

function containersOf(job: V1Job): V1Container[] {
  const pod = job.spec?.template.spec;
  return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])];
}

describe('packer.jobSpec', () => {
  it('runs an HCL2 build: init, validate, then build, from the checkout, in one pinned image', () => {
    const spec = specOf({
      packer_template: HCL_TEMPLATE,
      variables: { region: 'eu-west-1' },
      build_args: { AWS_REGION: 'eu-west-1' },
    });

    const translation = packer.jobSpec(spec, jobContext);
    const job = jobOfTranslation(translation);
    const pod = job.spec?.template.spec;

    const template = '/workspace/source/template.pkr.hcl';
    const step = (name: string, args: string[]): V1Container => ({
      name,
      image: PACKER_IMAGE,
      imagePullPolicy: 'IfNotPresent',
      command: ['/bin/packer'],
      args,
      env: [
        { name: 'CI', value: 'true' },
        { name: 'AWS_REGION', value: 'eu-west-1' },
        ...PACKER_ENV,
      ],
      resources: BUILDER_RESOURCES,
      securityContext: PACKER_SECURITY_CONTEXT,
      terminationMessagePolicy: 'FallbackToLogsOnError',
      volumeMounts: [
        { name: 'workspace', mountPath: '/workspace' },
        { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
        { name: 'dockerfile', mountPath: template, subPath: 'template.pkr.hcl', readOnly: true },
        ...PACKER_MOUNTS,
      ],
      workingDir: '/workspace/source',
    });
    expect(pod?.initContainers?.map((container) => container.name)).toEqual([
      'source',
      'packer-init',
      'packer-validate',
    ]);
    expect(pod?.initContainers?.[0]?.args).toEqual([REPOSITORY, '', '']);
    expect(pod?.initContainers?.slice(1)).toEqual([
      step('packer-init', ['init', template]),
      step('packer-validate', ['validate', '-var', 'region=eu-west-1', template]),
    ]);
    expect(pod?.containers).toEqual([
      step('build', [
        'build',
        '-color=false',
        '-on-error=cleanup',
        '-var',
        'region=eu-west-1',
        template,
      ]),
    ]);
    expect(pod?.volumes).toEqual([
      { name: 'workspace', emptyDir: {} },
      { name: 'source-tmp', emptyDir: {} },
      { name: 'dockerfile', configMap: { name: `kiln-${BUILD_ID}`, defaultMode: 0o444 } },
      ...PACKER_VOLUMES,
    ]);
    expect(translation.kind === 'job' && translation.configMap?.data).toEqual({
      'template.pkr.hcl': HCL_TEMPLATE,
    });
    expect(translation.kind === 'job' && translation.notes).toEqual([
      PACKER_NOTES.noImage,
      SKELETON_STEPS_NOTE,
      NO_MANIFEST_STEP_NOTE,
    ]);
    expect(job.spec?.activeDeadlineSeconds).toBe(5400);
  });

  it('ignores registry_type s3: packer makes machine images, so there is no image to upload', () => {
    const spec = specOf({ packer_template: HCL_TEMPLATE, registry_type: 's3' });
    const s3 = { bucket: 'kiln-images', region: 'eu-west-1', credentials: true };

    expect(packer.jobSpec(spec, { ...jobContext, s3 })).toEqual(packer.jobSpec(spec, jobContext));
  });

  it('returns plain JSON: the object survives a JSON round trip unchanged', () => {
    const translation = packer.jobSpec(specOf({ packer_template: HCL_TEMPLATE }), jobContext);

    expect(JSON.parse(JSON.stringify(translation))).toEqual(translation);
  });

  it('with kiln’s step image, runs packer as an init container and then packer-manifest, which reads the template and the checkout read-only', () => {
    const spec = specOf({ packer_template: JSON_TEMPLATE });

    const translation = packer.jobSpec(spec, { ...jobContext, ...withSteps });
    const pod = jobOfTranslation(translation).spec?.template.spec;

    expect(pod?.initContainers?.map((container) => container.name)).toEqual([
      'source',
      'packer-validate',
      'build',
    ]);
    expect(pod?.initContainers?.[2]?.workingDir).toBe('/workspace/source');
    expect(pod?.containers).toEqual([
      {
        name: 'packer-manifest',
        image: STEP_IMAGE,
        imagePullPolicy: 'IfNotPresent',
        command: ['/nodejs/bin/node', 'dist/steps/step-main.js'],
        args: ['packer-manifest', '/kiln/dockerfile/template.json', '/workspace/source'],
        workingDir: '/app',
        env: [
          { name: 'KILN_STEP_OUT_DIR', value: '/kiln/out' },
          { name: 'KILN_TERMINATION_MESSAGE_PATH', value: '/dev/termination-log' },
        ],
        resources: {
          requests: { cpu: '250m', memory: '512Mi', 'ephemeral-storage': '1Gi' },
          limits: { cpu: '1', memory: '2Gi', 'ephemeral-storage': '4Gi' },
        },
        securityContext: STEP_SECURITY_CONTEXT,
        terminationMessagePolicy: 'FallbackToLogsOnError',
        terminationMessagePath: '/dev/termination-log',
        // packer's mounts, read-only; not the template's subPath mount, which shows nothing of
        // the ConfigMap through the workspace volume.
        volumeMounts: [
          { name: 'workspace', mountPath: '/workspace', readOnly: true },
          { name: 'dockerfile', mountPath: '/kiln/dockerfile', readOnly: true },
          ...PACKER_MOUNTS.map((mount) => ({ ...mount, readOnly: true })),
        ],
      },
    ]);
    // No volume the step does not mount (the SBOM and scan tools' scratch).
    expect(pod?.volumes?.map((volume) => volume.name)).toEqual([
      'workspace',
      'source-tmp',
      'dockerfile',
      'packer-home',
      'packer-plugins',
      'packer-tmp',
    ]);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      PACKER_NOTES.noImage,
      PACKER_NOTES.jsonInit,
      SKELETON_STEPS_NOTE,
    ]);
  });

  it('without a repository, packer-manifest reads from packer’s home, where packer ran', () => {
    const spec = specOf({ packer_template: HCL_TEMPLATE }, {}, withoutRepository);

    const pod = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...withSteps })).spec
      ?.template.spec;

    expect(pod?.initContainers?.map((container) => container.name)).toEqual([
      'packer-init',
      'packer-validate',
      'build',
    ]);
    expect(pod?.containers?.map((container) => [container.name, container.args])).toEqual([
      [
        'packer-manifest',
        ['packer-manifest', '/kiln/dockerfile/template.pkr.hcl', '/kiln/packer/home'],
      ],
    ]);
    expect(pod?.containers?.[0]?.volumeMounts?.map((mount) => mount.mountPath)).toEqual([
      '/kiln/dockerfile',
      '/kiln/packer/home',
      '/kiln/packer/plugins',
      '/tmp',
    ]);
  });

  it('gives packer-manifest no mount of the registry credentials packer does not get either', () => {
    const spec = specOf({ packer_template: HCL_TEMPLATE }, {}, withoutRegistry);
    const context = { ...jobContext, ...withSteps, credentialsSecret: `kiln-${BUILD_ID}-registry` };

    const pod = jobOfTranslation(packer.jobSpec(spec, context)).spec?.template.spec;
    const volumes = new Set(pod?.volumes?.map((volume) => volume.name));
    const step = pod?.containers?.find((container) => container.name === 'packer-manifest');

    expect(step?.volumeMounts?.map((mount) => mount.name)).toEqual([
      'workspace',
      'dockerfile',
      'packer-home',
      'packer-plugins',
      'packer-tmp',
    ]);
    expect(step?.volumeMounts?.filter((mount) => !volumes.has(mount.name))).toEqual([]);
  });

  it.each<{
    name: string;
    spec: BuildSpec;
    context?: Partial<JobContext>;
    steps: Array<[string, string[]]>;
    env: Array<{ name: string; value: string }>;
    workingDir: string;
    volumes: string[];
    configMap: Record<string, string>;
    notes: string[];
  }>([
    {
      name: 'a JSON template: no packer init, with a note saying why',
      spec: specOf({ packer_template: JSON_TEMPLATE, variables: { region: 'eu-west-1' } }),
      steps: [
        [
          'packer-validate',
          ['validate', '-var', 'region=eu-west-1', '/workspace/source/template.json'],
        ],
        [
          'build',
          [
            'build',
            '-color=false',
            '-on-error=cleanup',
            '-var',
            'region=eu-west-1',
            '/workspace/source/template.json',
          ],
        ],
      ],
      env: [{ name: 'CI', value: 'true' }, ...PACKER_ENV],
      workingDir: '/workspace/source',
      volumes: [
        'workspace',
        'source-tmp',
        'dockerfile',
        'packer-home',
        'packer-plugins',
        'packer-tmp',
      ],
      configMap: { 'template.json': JSON_TEMPLATE },
      notes: [PACKER_NOTES.noImage, PACKER_NOTES.jsonInit],
    },
    {
      name: 'no repository: the template from the ConfigMap, packer working in its home',
      spec: specOf({ packer_template: HCL_TEMPLATE }, {}, withoutRepository),
      steps: [
        ['packer-init', ['init', '/kiln/dockerfile/template.pkr.hcl']],
        ['packer-validate', ['validate', '/kiln/dockerfile/template.pkr.hcl']],
        [
          'build',
          ['build', '-color=false', '-on-error=cleanup', '/kiln/dockerfile/template.pkr.hcl'],
        ],
      ],
      env: [{ name: 'CI', value: 'true' }, ...PACKER_ENV],
      workingDir: '/kiln/packer/home',
      volumes: ['dockerfile', 'packer-home', 'packer-plugins', 'packer-tmp'],
      configMap: { 'template.pkr.hcl': HCL_TEMPLATE },
      notes: [PACKER_NOTES.noImage],
    },
    {
      name: 'variables of every JSON type, each value one argv element after -var',
      spec: specOf(
        {
          packer_template: HCL_TEMPLATE,
          variables: { region: SHELL_BAIT, count: 2, zones: ['a', 'b'], tags: { team: 'x' } },
        },
        {},
        withoutRepository,
      ),
      steps: [
        ['packer-init', ['init', '/kiln/dockerfile/template.pkr.hcl']],
        [
          'packer-validate',
          [
            'validate',
            '-var',
            `region=${SHELL_BAIT}`,
            '-var',
            'count=2',
            '-var',
            'zones=["a","b"]',
            '-var',
            'tags={"team":"x"}',
            '/kiln/dockerfile/template.pkr.hcl',
          ],
        ],
        [
          'build',
          [
            'build',
            '-color=false',
            '-on-error=cleanup',
            '-var',
            `region=${SHELL_BAIT}`,
            '-var',
            'count=2',
            '-var',
            'zones=["a","b"]',
            '-var',
            'tags={"team":"x"}',
            '/kiln/dockerfile/template.pkr.hcl',
          ],
        ],
      ],
      env: [{ name: 'CI', value: 'true' }, ...PACKER_ENV],
      workingDir: '/kiln/packer/home',
      volumes: ['dockerfile', 'packer-home', 'packer-plugins', 'packer-tmp'],
      configMap: { 'template.pkr.hcl': HCL_TEMPLATE },
      notes: [PACKER_NOTES.noImage],
    },
    {
      name: "the build's environment and build args as packer's environment; kiln's own settings win",
      spec: specOf(
        {
          packer_template: HCL_TEMPLATE,
          build_args: { AWS_PROFILE: 'images', PACKER_PLUGIN_PATH: '/usr/bin', CI: 'false' },
        },
        { environment: { HOME: '/root', MSG: SHELL_BAIT } },
        withoutRepository,
      ),
      steps: [
        ['packer-init', ['init', '/kiln/dockerfile/template.pkr.hcl']],
        ['packer-validate', ['validate', '/kiln/dockerfile/template.pkr.hcl']],
        [
          'build',
          ['build', '-color=false', '-on-error=cleanup', '/kiln/dockerfile/template.pkr.hcl'],
        ],
      ],
      env: [
        { name: 'MSG', value: SHELL_BAIT },
        { name: 'AWS_PROFILE', value: 'images' },
        { name: 'CI', value: 'false' },
        ...PACKER_ENV,
      ],
      workingDir: '/kiln/packer/home',
      volumes: ['dockerfile', 'packer-home', 'packer-plugins', 'packer-tmp'],
      configMap: { 'template.pkr.hcl': HCL_TEMPLATE },
      notes: [
        PACKER_NOTES.noImage,
        "kiln sets HOME, PACKER_PLUGIN_PATH for packer; the build's value is not used",
      ],
    },
    {
      name: "the operator's registry credentials are not mounted: packer pushes no image",
      spec: specOf({ packer_template: HCL_TEMPLATE }, {}, withoutRegistry),
      context: {
        settings: { ...DEFAULT_JOB_SETTINGS, credentialsSecret: 'registry-push' },
        credentialsSecret: `kiln-${BUILD_ID}-registry`,
      },
      steps: [
        ['packer-init', ['init', '/workspace/source/template.pkr.hcl']],
        ['packer-validate', ['validate', '/workspace/source/template.pkr.hcl']],
        [
          'build',
          ['build', '-color=false', '-on-error=cleanup', '/workspace/source/template.pkr.hcl'],
        ],
      ],
      env: [{ name: 'CI', value: 'true' }, ...PACKER_ENV],
      workingDir: '/workspace/source',
      volumes: [
        'workspace',
        'source-tmp',
        'dockerfile',
        'packer-home',
        'packer-plugins',
        'packer-tmp',
      ],
      configMap: { 'template.pkr.hcl': HCL_TEMPLATE },
      notes: [PACKER_NOTES.noImage],
    },
  ])('$name', ({ spec, context, steps, env, workingDir, volumes, configMap, notes }) => {
    const translation = packer.jobSpec(spec, { ...jobContext, ...context });
    const job = jobOfTranslation(translation);

    expect(packerSteps(job).map((step) => [step.name, step.args])).toEqual(steps);
    for (const step of packerSteps(job)) {
      expect(step.image).toBe(PACKER_IMAGE);
      expect(step.command).toEqual(['/bin/packer']);
      expect(step.env).toEqual(env);
      expect(step.workingDir).toBe(workingDir);
      expect(step.securityContext).toEqual(PACKER_SECURITY_CONTEXT);
    }
    expect(job.spec?.template.spec?.volumes?.map((volume) => volume.name)).toEqual(volumes);
    expect(translation.kind === 'job' && translation.configMap?.data).toEqual(configMap);
    expect(translation.kind === 'job' && translation.notes).toEqual([
      ...notes,
      SKELETON_STEPS_NOTE,
      NO_MANIFEST_STEP_NOTE,
    ]);
  });

  it.each<[string, BuildSpec, string]>([
    [
      'a JSON template with a docker builder',
      specOf({
        packer_template: JSON.stringify({ builders: [{ type: 'docker', image: 'ubuntu:24.04' }] }),
      }),
      `the packer builder "docker" needs a Docker daemon, which a build pod (Pod Security "restricted") does not have; use a cloud builder, or the local runner`,
    ],
    [
      'an HCL2 template whose builders name a qemu source',
      specOf({
        packer_template: 'source "qemu" "vm" {\n}\n',
        builders: ['source.qemu.vm'],
      }),
      `the packer builder "qemu" needs /dev/kvm, which a build pod (Pod Security "restricted") does not have; use a cloud builder, or the local runner`,
    ],
    [
      'a template larger than a ConfigMap holds',
      specOf({ packer_template: BIG_TEMPLATE }),
      `the packer template is ${Buffer.byteLength(BIG_TEMPLATE)} bytes; a build on Kubernetes takes at most 1000000`,
    ],
  ])('refuses %s, with the reason', (_name, spec, reason) => {
    expect(packer.jobSpec(spec, jobContext)).toEqual({ kind: 'unsupported', reason });
  });
});

describe('every packer Job', () => {
  const user = { arg: SHELL_BAIT };
  const cases: Array<[string, BuildSpec, Partial<JobContext>]> = [
    [
      'an HCL2 build with variables, environment and build args',
      specOf(
        {
          packer_template: HCL_TEMPLATE,
          variables: { region: user.arg },
          build_args: { X: user.arg },
        },
        { environment: { Y: user.arg } },
      ),
      {},
    ],
    ['a JSON build', specOf({ packer_template: JSON_TEMPLATE }), {}],
    [
      'a build without a repository',
      specOf({ packer_template: HCL_TEMPLATE }, {}, withoutRepository),
      {},
    ],
    [
      'a build with credentials and a service account',
      specOf({ packer_template: HCL_TEMPLATE }),
      { credentialsSecret: 'push', settings: { ...DEFAULT_JOB_SETTINGS, serviceAccountName: 'b' } },
    ],
    [
      'a build whose manifest the packer-manifest step reads',
      specOf({ packer_template: JSON_TEMPLATE, variables: { region: user.arg } }),
      { ...withSteps, credentialsSecret: 'push' },
    ],
  ];

  it.each(cases)('%s keeps the hardening rules', (_name, spec, context) => {
    const job = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...context }));

    expect(hardeningProblems(job)).toEqual([]);
  });

  it.each(cases)('%s passes the documented Pod Security level, restricted', (_n, spec, ctx) => {
    const job = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...ctx }));
    const pod = JSON.parse(JSON.stringify(job.spec?.template.spec)) as PodSpec;

    expect(POD_SECURITY_LEVEL).toBe('restricted');
    expect(restrictedViolations(pod, job.spec?.template.metadata ?? {})).toEqual([]);
  });

  it.each(cases)('%s passes user text to no shell script', (_name, spec, context) => {
    const job = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...context }));

    for (const container of containersOf(job)) {
      const argv = [...(container.command ?? []), ...(container.args ?? [])];
      const script = argv.indexOf('-c') === -1 ? undefined : argv[argv.indexOf('-c') + 1];
      if (container.name === 'source') expect(script).toBe(SOURCE_SCRIPT);
      else expect(script).toBeUndefined();
      expect(script ?? '').not.toContain(user.arg);
    }
  });

  it.each(cases)(
    '%s runs packer with no flag its documentation does not list',
    (_name, spec, context) => {
      const job = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...context }));

      for (const step of packerSteps(job)) {
        const [command = '', ...rest] = step.args ?? [];
        const flags = rest.filter(
          (arg, index) => arg.startsWith('-') && rest[index - 1] !== '-var',
        );
        expect({
          command,
          flags: flags.filter((flag) => !DOCUMENTED_FLAGS[command]?.test(flag)),
        }).toEqual({ command, flags: [] });
        expect(rest.at(-1)).toMatch(
          /^\/(?:workspace\/source|kiln\/dockerfile)\/template\.(?:json|pkr\.hcl)$/,
        );
      }
    },
  );

  it.each(cases)(
    '%s gives every packer step the same mounts, resources and user',
    (_n, spec, ctx) => {
      const job = jobOfTranslation(packer.jobSpec(spec, { ...jobContext, ...ctx }));
      const [first, ...others] = packerSteps(job);

      for (const step of others) {
        expect(step.volumeMounts).toEqual(first?.volumeMounts);
        expect(step.resources).toEqual(first?.resources);
        expect(step.securityContext).toEqual(first?.securityContext);
        expect(step.env).toEqual(first?.env);
      }
      expect(first?.volumeMounts?.map((mount) => mount.mountPath)).not.toContain(
        '/kiln/packer/docker',
      );
    },
  );
});
