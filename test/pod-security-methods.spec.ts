import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import type { V1Container, V1Job, V1PodSpec, V1SecurityContext } from '@kubernetes/client-node';
import fc from 'fast-check';

import { type BuildSpec, type SpecContext, specOfManifest } from '../src/manifest/build-spec.js';
import {
  BUILDKIT_SECURITY_CONTEXT,
  POD_SECURITY_LEVEL as BUILDX_LEVEL,
} from '../src/build-methods/buildx.js';
import {
  BUILDER_CONTAINER,
  DEFAULT_JOB_SETTINGS,
  hardeningProblems,
  type JobContext,
  type JobSettings,
  type JobTranslation,
  type PodSecurityLevel,
  SOURCE_COMMAND,
  SOURCE_CONTAINER,
  SOURCE_SCRIPT,
  SOURCE_SECURITY_CONTEXT,
} from '../src/build-methods/job.js';
import {
  KANIKO_SECURITY_CONTEXT,
  POD_SECURITY_LEVEL as KANIKO_LEVEL,
} from '../src/build-methods/kaniko.js';
import { validateManifest } from '../src/build-methods/manifest.js';
import { BUILD_METHODS } from '../src/build-methods/methods.js';
import {
  levelOfNamespace,
  namespaceOfMethod,
  type NamespacesByLevel,
  oneNamespace,
  placementProblem,
} from '../src/build-methods/namespaces.js';
import {
  PACKER_SECURITY_CONTEXT,
  POD_SECURITY_LEVEL as PACKER_LEVEL,
} from '../src/build-methods/packer.js';
import {
  CNB_GROUP_ID,
  CNB_SECURITY_CONTEXT,
  CNB_USER_ID,
  POD_SECURITY_LEVEL as PAKETO_LEVEL,
} from '../src/build-methods/paketo.js';
import {
  OUT_VOLUME,
  STEP_CONTAINERS,
  STEP_SCRIPT,
  STEP_SECURITY_CONTEXT,
  STEP_SHELLS,
  STEP_TMP_VOLUME,
} from '../src/build-methods/steps.js';
import { METHOD_NAMES, type MethodName, SBOM_TOOLS, SCAN_TOOLS } from '../src/manifest/types.js';
import { manifestSpec, referenceSpec } from './support/build-specs.js';
import {
  baselineViolations,
  type PodMetadata,
  type PodSpec,
  restrictedViolations,
} from './support/pod-security.js';

/*
 * Pod security per build method (issue 14 item 6; POD-01 of docs/test-scenarios.md, and POD-02 as
 * far as it can be checked without an admission controller): every Job a method renders is admitted
 * at the Pod Security level its file documents (`POD_SECURITY_LEVEL`), keeps the POD-01 hardening,
 * and no manifest can change its service account, privileges, host namespaces, volumes or
 * namespace. The table "Pod Security per build method" in docs/install-kubernetes.md states the
 * same levels (checked below).
 */

type VolumeType = 'emptyDir' | 'configMap' | 'secret';

/** What a method's pods are made of, as its file fixes it: nothing here comes from a build. */
interface MethodProfile {
  /** The level its file exports (`container` builds with kaniko and shares kaniko's). */
  readonly level: PodSecurityLevel;
  /** For a method documented as privileged: what baseline refuses in each of its pods, exactly. */
  readonly baselineRefusals?: readonly string[];
  readonly builderCommand: readonly string[];
  readonly builderSecurityContext: V1SecurityContext;
  /** Containers that run the builder's image with its security context (packer's init steps). */
  readonly builderContainers: readonly string[];
  readonly podSecurityContext: V1PodSpec['securityContext'];
  /** The `source` container's user when the builder owns the checkout (paketo). */
  readonly sourceUser?: { readonly runAsUser: number; readonly runAsGroup: number };
  /** Every volume a pod of the method may have, by name: a pod has a subset of them. */
  readonly volumes: Readonly<Record<string, VolumeType>>;
  /** Its pods run in a user namespace (`hostUsers: false`) when the operator asks for it. */
  readonly userNamespace: boolean;
}

const RUNTIME_DEFAULT = { seccompProfile: { type: 'RuntimeDefault' } };

/** The volumes jobOf gives any method: checkout, ConfigMap, credentials, the steps' scratch. */
const SKELETON_VOLUMES: Readonly<Record<string, VolumeType>> = {
  workspace: 'emptyDir',
  'source-tmp': 'emptyDir',
  dockerfile: 'configMap',
  'registry-credentials': 'secret',
  [OUT_VOLUME]: 'emptyDir',
  [STEP_TMP_VOLUME]: 'emptyDir',
};

const KANIKO_PROFILE: MethodProfile = {
  level: KANIKO_LEVEL,
  builderCommand: ['/kaniko/executor'],
  builderSecurityContext: KANIKO_SECURITY_CONTEXT,
  builderContainers: [BUILDER_CONTAINER],
  podSecurityContext: RUNTIME_DEFAULT,
  volumes: SKELETON_VOLUMES,
  userNamespace: true,
};

const PROFILES: Readonly<Record<MethodName, MethodProfile>> = {
  kaniko: KANIKO_PROFILE,
  container: KANIKO_PROFILE,
  buildx: {
    level: BUILDX_LEVEL,
    // buildx.ts: rootless BuildKit needs seccomp and AppArmor Unconfined, which baseline forbids.
    baselineRefusals: [
      `container ${BUILDER_CONTAINER}: AppArmor Unconfined`,
      `container ${BUILDER_CONTAINER}: seccomp Unconfined`,
    ],
    builderCommand: ['buildctl-daemonless.sh'],
    builderSecurityContext: BUILDKIT_SECURITY_CONTEXT,
    builderContainers: [BUILDER_CONTAINER],
    podSecurityContext: { fsGroup: BUILDKIT_SECURITY_CONTEXT.runAsUser, ...RUNTIME_DEFAULT },
    volumes: {
      ...SKELETON_VOLUMES,
      'build-secrets': 'secret',
      buildkitd: 'emptyDir',
      'buildkit-run': 'emptyDir',
    },
    // buildx.ts: rootless BuildKit maps subordinate ids a pod user namespace does not hold.
    userNamespace: false,
  },
  paketo: {
    level: PAKETO_LEVEL,
    builderCommand: ['/cnb/lifecycle/creator'],
    builderSecurityContext: CNB_SECURITY_CONTEXT,
    builderContainers: [BUILDER_CONTAINER],
    podSecurityContext: {
      runAsUser: CNB_USER_ID,
      runAsGroup: CNB_GROUP_ID,
      fsGroup: CNB_GROUP_ID,
      runAsNonRoot: true,
      ...RUNTIME_DEFAULT,
    },
    sourceUser: { runAsUser: CNB_USER_ID, runAsGroup: CNB_GROUP_ID },
    volumes: { ...SKELETON_VOLUMES, layers: 'emptyDir' },
    userNamespace: true,
  },
  packer: {
    level: PACKER_LEVEL,
    builderCommand: ['/bin/packer'],
    builderSecurityContext: PACKER_SECURITY_CONTEXT,
    builderContainers: [BUILDER_CONTAINER, 'packer-init', 'packer-validate'],
    podSecurityContext: RUNTIME_DEFAULT,
    // packer pushes no image (its one step reads what packer made, with no scratch of its own)
    // and drops the credentials volume jobOf would add.
    volumes: {
      workspace: 'emptyDir',
      'source-tmp': 'emptyDir',
      dockerfile: 'configMap',
      'packer-home': 'emptyDir',
      'packer-plugins': 'emptyDir',
      'packer-tmp': 'emptyDir',
    },
    userNamespace: true,
  },
};

/** The fields a build pod may set at all; anything else would have come from somewhere new. */
const POD_FIELDS = new Set([
  'restartPolicy',
  'automountServiceAccountToken',
  'enableServiceLinks',
  'serviceAccountName',
  // Only `false` (a user namespace), only when the operator asks for it: checked below.
  'hostUsers',
  'securityContext',
  'initContainers',
  'containers',
  'volumes',
]);
const STEP_NAMES: readonly string[] = Object.values(STEP_CONTAINERS);
const KILN_STEP_COMMAND = ['/nodejs/bin/node', 'dist/steps/step-main.js'];
const SHELL = /(?:^|\/)(?:ba|da|a)?sh$/;

const REPOSITORY = 'https://git.example.com/team/app.git';
const BUILD_ID = '5b0e7c1a-2d3f-4e5a-8b6c-7d8e9f0a1b2c';
const PINNED = (name: string, hex: string): string => `${name}@sha256:${hex.repeat(64)}`;
const KILN_IMAGE = PINNED('registry.example.com/kiln:0.1.0', 'a');
const PAKETO_BUILDER = PINNED('paketobuildpacks/builder-jammy-base:0.4.400', 'b');

/**
 * The steps on: kiln's image and the upload URL set, and a Snyk token and image (kiln pins none)
 * so snyk runs too.
 */
const STEPS_ON: JobSettings['steps'] = {
  ...DEFAULT_JOB_SETTINGS.steps,
  kilnImage: KILN_IMAGE,
  uploadUrl: 'http://kiln-api.kiln.svc:8080',
  snykToken: { secret: 'snyk', key: 'token' },
  scanImages: {
    ...DEFAULT_JOB_SETTINGS.steps.scanImages,
    snyk: PINNED('docker.io/snyk/snyk:linux', 'c'),
  },
};

function jobContext(settings: JobSettings, overrides: Partial<JobContext> = {}): JobContext {
  return {
    buildId: BUILD_ID,
    tenantId: '11111111-2222-4333-8444-555555555555',
    projectId: '66666666-7777-4888-9999-aaaaaaaaaaaa',
    buildNumber: 3,
    namespace: 'kiln-builds',
    settings,
    configMapName: `kiln-${BUILD_ID}`,
    buildSecretName: `kiln-${BUILD_ID}`,
    ...overrides,
  };
}

function podOf(job: V1Job): V1PodSpec {
  const pod = job.spec?.template.spec;
  if (pod === undefined) throw new Error('the Job has no pod template');
  return pod;
}

function containersOf(pod: V1PodSpec): V1Container[] {
  return [...(pod.initContainers ?? []), ...pod.containers];
}

/**
 * Deep equality of two JSON values. The Job is a structuredClone, made in another realm than the
 * test's literals (Jest runs each file in a vm context), so both are read back as JSON first.
 */
function same(a: unknown, b: unknown): boolean {
  const plain = (value: unknown): unknown =>
    value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  return isDeepStrictEqual(plain(a), plain(b));
}

/** The pod as the Pod Security checks read it (plain JSON, as the API server receives it). */
function psaView(pod: V1PodSpec): PodSpec {
  return JSON.parse(JSON.stringify(pod)) as PodSpec;
}

/** What a namespace enforcing `level` refuses in the pod; privileged refuses nothing. */
function refusedAt(level: PodSecurityLevel, pod: PodSpec, metadata: PodMetadata): string[] {
  switch (level) {
    case 'restricted':
      return restrictedViolations(pod, metadata);
    case 'baseline':
      return baselineViolations(pod, metadata);
    case 'privileged':
      return [];
  }
}

/** Every script a container hands to a shell with `-c`, wherever in its argv. */
function shellScripts(container: V1Container): string[] {
  const argv = [...(container.command ?? []), ...(container.args ?? [])];
  return argv.flatMap((arg, index) =>
    arg === '-c' && index > 0 && SHELL.test(argv[index - 1] ?? '') ? [argv[index + 1] ?? ''] : [],
  );
}

/** The commands a container of this name may run: all kiln's, none with a build's text. */
function allowedCommands(profile: MethodProfile, name: string): ReadonlyArray<readonly string[]> {
  if (name === SOURCE_CONTAINER) return [SOURCE_COMMAND];
  if (profile.builderContainers.includes(name)) return [profile.builderCommand];
  if (
    name === STEP_CONTAINERS.imageRef ||
    name === STEP_CONTAINERS.upload ||
    name === STEP_CONTAINERS.packerManifest
  ) {
    return [KILN_STEP_COMMAND];
  }
  // The SBOM and scan steps run STEP_SCRIPT in the chosen tool's shell.
  return Object.values(STEP_SHELLS).map(({ shell }) => [shell, '-c', STEP_SCRIPT, `kiln-${name}`]);
}

/** The security context a container of this name must have, from the method's constants. */
function expectedSecurityContext(profile: MethodProfile, name: string): V1SecurityContext {
  if (name === SOURCE_CONTAINER) return { ...SOURCE_SECURITY_CONTEXT, ...profile.sourceUser };
  if (profile.builderContainers.includes(name)) return profile.builderSecurityContext;
  return STEP_SECURITY_CONTEXT;
}

/**
 * Everything in a rendered Job that must not depend on the build: namespace, service account,
 * pod fields, volumes and mounts, containers with their commands, scripts and security contexts,
 * and the documented Pod Security level. Empty when the Job keeps them all.
 */
function fixedShapeProblems(
  method: MethodName,
  translation: Extract<JobTranslation, { kind: 'job' }>,
  context: JobContext,
): string[] {
  const profile = PROFILES[method];
  const { job, configMap } = translation;
  const pod = podOf(job);
  const problems: string[] = [];
  const problem = (what: string) => problems.push(what);

  if (job.metadata?.namespace !== context.namespace) problem('the Job left its namespace');
  if (configMap !== undefined && configMap.metadata?.namespace !== context.namespace)
    problem('the ConfigMap left its namespace');
  if (job.spec?.template.metadata !== undefined && 'namespace' in job.spec.template.metadata)
    problem('the pod template names a namespace');
  if (pod.serviceAccountName !== context.settings.serviceAccountName)
    problem(`service account ${pod.serviceAccountName}`);
  if (pod.automountServiceAccountToken !== false) problem('the service account token is mounted');
  for (const field of Object.keys(pod).filter((key) => !POD_FIELDS.has(key)))
    problem(`pod field ${field}`);
  const userNamespace = context.settings.userNamespaces === true && profile.userNamespace;
  if (pod.hostUsers !== (userNamespace ? false : undefined))
    problem(`hostUsers ${JSON.stringify(pod.hostUsers)}`);
  if (!same(pod.securityContext, profile.podSecurityContext))
    problem(`pod securityContext ${JSON.stringify(pod.securityContext)}`);

  const secretNames = [
    context.credentialsSecret ?? context.settings.credentialsSecret,
    context.buildSecretName,
  ].filter((secret) => secret !== undefined);
  const volumeNames = new Set<string>();
  for (const volume of pod.volumes ?? []) {
    volumeNames.add(volume.name);
    const types = Object.keys(volume).filter((key) => key !== 'name');
    const type = profile.volumes[volume.name];
    if (type === undefined || types.length !== 1 || types[0] !== type) {
      problem(`volume ${volume.name}: ${types.join(', ')}`);
    } else if (type === 'emptyDir' && !same(volume.emptyDir, {})) {
      problem(`volume ${volume.name}: emptyDir ${JSON.stringify(volume.emptyDir)}`);
    } else if (type === 'configMap' && volume.configMap?.name !== context.configMapName) {
      problem(`volume ${volume.name}: ConfigMap ${volume.configMap?.name}`);
    } else if (type === 'secret' && !secretNames.includes(volume.secret?.secretName ?? '')) {
      problem(`volume ${volume.name}: Secret ${volume.secret?.secretName}`);
    }
  }

  for (const container of containersOf(pod)) {
    const at = `container ${container.name}`;
    const known =
      container.name === SOURCE_CONTAINER ||
      profile.builderContainers.includes(container.name) ||
      STEP_NAMES.includes(container.name);
    if (!known) {
      problem(`${at}: not one of the method's containers`);
      continue;
    }
    if (!allowedCommands(profile, container.name).some((c) => same(c, container.command)))
      problem(`${at}: command ${JSON.stringify(container.command)}`);
    for (const script of shellScripts(container)) {
      if (script !== SOURCE_SCRIPT && script !== STEP_SCRIPT) problem(`${at}: a script of its own`);
    }
    if (container.securityContext?.privileged === true) problem(`${at}: privileged`);
    if (!same(container.securityContext, expectedSecurityContext(profile, container.name)))
      problem(`${at}: securityContext ${JSON.stringify(container.securityContext)}`);
    if (container.ports !== undefined) problem(`${at}: ports`);
    if (container.volumeDevices !== undefined) problem(`${at}: volumeDevices`);
    for (const mount of container.volumeMounts ?? []) {
      if (!volumeNames.has(mount.name)) problem(`${at}: mounts a volume the pod lacks`);
      const paths = [mount.mountPath, mount.subPath ?? ''];
      if (paths.some((path) => path.split('/').includes('..')))
        problem(`${at}: mount ${mount.mountPath} climbs out of its directory`);
    }
  }

  const metadata = job.spec?.template.metadata ?? {};
  problems.push(...refusedAt(profile.level, psaView(pod), metadata).map((v) => `PSA: ${v}`));
  if (profile.baselineRefusals !== undefined) {
    const refused = baselineViolations(psaView(pod), metadata);
    if (!same(refused, profile.baselineRefusals))
      problem(`baseline refuses ${JSON.stringify(refused)}`);
  }
  // The paketo builder is the build's choice and may carry no digest; kiln says so in a note.
  const pinProblem = `container ${BUILDER_CONTAINER}: image `;
  problems.push(
    ...hardeningProblems(job).filter(
      (p) => !(method === 'paketo' && p.startsWith(pinProblem) && p.endsWith('pinned by digest')),
    ),
  );
  return problems;
}

// ---- 1. The matrix: each method over representative manifests, steps on and off --------------

const DOCKERFILE = 'FROM docker.io/library/alpine:3.20\nRUN echo built\n';
const WITH_EVERYTHING: SpecContext = {
  project: { name: 'App', gitRepositoryUrl: REPOSITORY, defaultRegistry: null },
  defaultRegistry: 'registry.example.com/kiln',
  timeoutSeconds: 1800,
};
const NO_REPOSITORY: SpecContext = {
  ...WITH_EVERYTHING,
  project: { ...WITH_EVERYTHING.project, gitRepositoryUrl: null },
};
const NO_REGISTRY: SpecContext = { ...WITH_EVERYTHING, defaultRegistry: undefined };

/** Fields most methods read: an output repository, build args, a target, the cache, a context. */
const EVERY_FIELD = {
  registry_repository: 'harbor.example.com/team/app',
  build_args: { VERSION: '1.2.3', HTTP_PROXY: 'http://proxy:3128' },
  target: 'runtime',
  cache: true,
  cache_repo: 'harbor.example.com/team/cache',
  build_context: 'app',
};
const EVERY_TOP_LEVEL = {
  environment: { CI: 'true', NODE_ENV: 'production' },
  tags: ['v1', 'latest', 'harbor.example.com/mirror/app:v1'],
};
const HCL_TEMPLATE =
  'source "amazon-ebs" "base" {\n  region = var.region\n}\n\nbuild {\n  sources = ["source.amazon-ebs.base"]\n}\n';
const JSON_TEMPLATE = JSON.stringify({
  variables: { region: '' },
  builders: [{ type: 'amazon-ebs', region: '{{user `region`}}' }],
  provisioners: [{ type: 'shell', inline: ['echo hi'] }],
});

/** Representative builds of each method (every one goes through the API's validation). */
const MANIFESTS: Readonly<Record<MethodName, ReadonlyArray<readonly [string, BuildSpec]>>> = {
  kaniko: [
    ['a minimal manifest', manifestSpec(WITH_EVERYTHING, 'kaniko', { dockerfile: DOCKERFILE })],
    [
      'every field',
      manifestSpec(
        WITH_EVERYTHING,
        'kaniko',
        { dockerfile: DOCKERFILE, ...EVERY_FIELD, sbom_tool: 'trivy', scan_tool: 'snyk' },
        EVERY_TOP_LEVEL,
      ),
    ],
    ['no repository', manifestSpec(NO_REPOSITORY, 'kaniko', { dockerfile: DOCKERFILE })],
    [
      'a reference-form build',
      referenceSpec({
        source: { repository: REPOSITORY, branch: 'main', commit: null, context: '.' },
        output: { repository: 'harbor.example.com/team/app', tags: [], registryType: null },
        buildArgs: { A: '1' },
      }),
    ],
    [
      'a reference-form build with no registry',
      referenceSpec({
        source: { repository: REPOSITORY, branch: null, commit: null, context: '.' },
      }),
    ],
  ],
  container: [
    [
      'a minimal manifest',
      manifestSpec(
        WITH_EVERYTHING,
        'container',
        {},
        {
          base_image: 'docker.io/library/node:22-alpine',
          instructions: ['RUN npm ci'],
        },
      ),
    ],
    [
      'every field',
      manifestSpec(
        WITH_EVERYTHING,
        'container',
        { ...EVERY_FIELD, sbom_tool: 'trivy', scan_tool: 'snyk' },
        {
          ...EVERY_TOP_LEVEL,
          base_image: 'docker.io/library/node:22-alpine',
          instructions: ['WORKDIR /app', 'COPY . .', 'RUN npm ci'],
        },
      ),
    ],
    [
      'no repository and no registry',
      manifestSpec(
        { ...NO_REPOSITORY, defaultRegistry: undefined },
        'container',
        {},
        {
          base_image: 'docker.io/library/alpine:3.20',
          instructions: ['RUN echo hi'],
        },
      ),
    ],
  ],
  buildx: [
    ['a minimal manifest', manifestSpec(WITH_EVERYTHING, 'buildx', { dockerfile: DOCKERFILE })],
    [
      'every field, platforms and secrets',
      manifestSpec(
        WITH_EVERYTHING,
        'buildx',
        {
          dockerfile: DOCKERFILE,
          ...EVERY_FIELD,
          platforms: ['linux/amd64', 'linux/arm64'],
          cache_to: 'type=registry,ref=harbor.example.com/team/cache:bx,mode=min',
          cache_from: ['harbor.example.com/team/cache:main'],
          secrets: { npm: 'npm-token-value', 'pip.conf': 'index-url' },
          sbom_tool: 'trivy',
          scan_tool: 'snyk',
        },
        EVERY_TOP_LEVEL,
      ),
    ],
    ['no repository', manifestSpec(NO_REPOSITORY, 'buildx', { dockerfile: DOCKERFILE })],
    ['no registry', manifestSpec(NO_REGISTRY, 'buildx', { dockerfile: DOCKERFILE })],
  ],
  paketo: [
    [
      'a minimal manifest',
      manifestSpec(WITH_EVERYTHING, 'paketo', { paketo_config: { builder: PAKETO_BUILDER } }),
    ],
    [
      'every field, buildpacks and platform env',
      manifestSpec(
        WITH_EVERYTHING,
        'paketo',
        {
          ...EVERY_FIELD,
          sbom_tool: 'trivy',
          scan_tool: 'snyk',
          paketo_config: {
            builder: PAKETO_BUILDER,
            buildpacks: ['paketo-buildpacks/nodejs', 'paketo-buildpacks/npm-install@1.2.3'],
            env: { BP_NODE_VERSION: '22', PATH: '/evil' },
            build_args: { BP_LOG_LEVEL: 'DEBUG' },
          },
        },
        EVERY_TOP_LEVEL,
      ),
    ],
  ],
  packer: [
    [
      'an HCL2 template with variables',
      manifestSpec(
        WITH_EVERYTHING,
        'packer',
        {
          packer_template: HCL_TEMPLATE,
          variables: { region: 'eu-west-1', count: 2 },
          build_args: { PKR_VAR_owner: 'team' },
        },
        EVERY_TOP_LEVEL,
      ),
    ],
    [
      'a JSON template',
      manifestSpec(WITH_EVERYTHING, 'packer', {
        packer_template: JSON_TEMPLATE,
        variables: { region: 'eu-west-1' },
      }),
    ],
    ['no repository', manifestSpec(NO_REPOSITORY, 'packer', { packer_template: HCL_TEMPLATE })],
  ],
};

/** The operator's settings: steps off and on, each plain and with every option that adds parts. */
const SETTINGS: ReadonlyArray<readonly [string, JobSettings]> = [false, true].flatMap((steps) => {
  const base = { ...DEFAULT_JOB_SETTINGS, steps: steps ? STEPS_ON : DEFAULT_JOB_SETTINGS.steps };
  const label = steps ? 'steps on' : 'steps off';
  return [
    [label, base],
    [
      `${label}, credentials, an insecure registry and a service account`,
      {
        ...base,
        credentialsSecret: 'registry-push',
        insecureRegistries: ['127.0.0.1:5000'],
        serviceAccountName: 'kiln-build',
      },
    ],
    [`${label}, user namespaces`, { ...base, userNamespaces: true }],
  ] as const;
});

interface Rendered {
  readonly name: string;
  readonly method: MethodName;
  readonly spec: BuildSpec;
  readonly context: JobContext;
  readonly translation: JobTranslation;
  readonly stepsOn: boolean;
}

const MATRIX: readonly Rendered[] = METHOD_NAMES.flatMap((method) =>
  MANIFESTS[method].flatMap(([manifest, spec]) =>
    SETTINGS.map(([label, settings]) => {
      const context = jobContext(settings);
      return {
        name: `${method}, ${manifest}, ${label}`,
        method,
        spec,
        context,
        translation: BUILD_METHODS[method].jobSpec(spec, context),
        stepsOn: settings.steps.kilnImage !== undefined,
      };
    }),
  ),
);

type RenderedJob = Rendered & { readonly translation: Extract<JobTranslation, { kind: 'job' }> };
const JOBS: readonly RenderedJob[] = MATRIX.filter(
  (rendered): rendered is RenderedJob => rendered.translation.kind === 'job',
);

const hasSteps = (job: V1Job): boolean =>
  containersOf(podOf(job)).some((container) => STEP_NAMES.includes(container.name));

describe('Pod security per build method (POD-01, POD-02)', () => {
  it('documents one level per method: kaniko and container baseline, buildx privileged, paketo and packer restricted', () => {
    expect(Object.fromEntries(METHOD_NAMES.map((m) => [m, PROFILES[m].level]))).toEqual({
      kaniko: 'baseline',
      buildx: 'privileged',
      container: 'baseline',
      paketo: 'restricted',
      packer: 'restricted',
    });
  });

  it('states the same level per method in the install guide’s table', () => {
    const guide = readFileSync(join(__dirname, '..', 'docs', 'install-kubernetes.md'), 'utf8');
    const table = guide.slice(guide.indexOf('| Method '));
    const stated = Object.fromEntries(
      [...table.matchAll(/^\| `([a-z]+)`[^|]*\|[^|]*\| (\w+) +\|/gm)].map((m) => [m[1]!, m[2]!]),
    );

    expect(stated).toEqual(Object.fromEntries(METHOD_NAMES.map((m) => [m, PROFILES[m].level])));
  });

  it('renders a Job of every method with the steps off and on, with step containers once they are on', () => {
    const summary = METHOD_NAMES.map((method) => {
      const jobs = (stepsOn: boolean) =>
        JOBS.filter((rendered) => rendered.method === method && rendered.stepsOn === stepsOn);
      return {
        method,
        jobsWithStepsOff: jobs(false).length > 0,
        stepContainersWithStepsOff: jobs(false).some(({ translation }) =>
          hasSteps(translation.job),
        ),
        stepContainersWithStepsOn: jobs(true).some(({ translation }) => hasSteps(translation.job)),
      };
    });

    // packer pushes no image: its one step, packer-manifest, reads what packer made instead.
    expect(summary).toEqual(
      METHOD_NAMES.map((method) => ({
        method,
        jobsWithStepsOff: true,
        stepContainersWithStepsOff: false,
        stepContainersWithStepsOn: true,
      })),
    );
  });

  it.each(JOBS)('$name: admitted at its documented level, and at no stricter one', (rendered) => {
    const profile = PROFILES[rendered.method];
    const pod = psaView(podOf(rendered.translation.job));
    const metadata = rendered.translation.job.spec?.template.metadata ?? {};

    expect(refusedAt(profile.level, pod, metadata)).toEqual([]);
    switch (profile.level) {
      case 'privileged':
        // The documented refusals, the builder's two Unconfined profiles, and nothing else.
        expect(baselineViolations(pod, metadata)).toEqual(profile.baselineRefusals);
        break;
      case 'baseline':
        expect(restrictedViolations(pod, metadata)).not.toEqual([]);
        break;
      case 'restricted':
        break;
    }
  });

  it.each(JOBS)('$name: keeps the POD-01 hardening', ({ spec, translation }) => {
    const job = translation.job;
    const pod = podOf(job);

    expect(pod.automountServiceAccountToken).toBe(false);
    // No host namespace; `hostUsers: false` is the opposite, a user namespace of the pod's own.
    expect(Object.keys(pod).filter((key) => key.startsWith('host') && key !== 'hostUsers')).toEqual(
      [],
    );
    expect(pod.hostUsers).not.toBe(true);
    expect((pod.volumes ?? []).filter((volume) => volume.hostPath !== undefined)).toEqual([]);
    for (const container of containersOf(pod)) {
      for (const kind of ['requests', 'limits'] as const) {
        expect({
          container: container.name,
          kind,
          has: Object.keys(container.resources?.[kind] ?? {}),
        }).toEqual({
          container: container.name,
          kind,
          has: expect.arrayContaining(['cpu', 'memory', 'ephemeral-storage']),
        });
      }
    }
    expect(pod.restartPolicy).toBe('Never');
    expect(job.spec?.activeDeadlineSeconds).toBe(spec.timeoutSeconds);
    expect(job.spec?.backoffLimit).toBe(0);
    expect(hardeningProblems(job)).toEqual([]);
  });

  it.each(JOBS)(
    "$name: kiln's own containers are restricted-clean on their own",
    ({ translation }) => {
      const pod = podOf(translation.job);
      const own = (containers: V1Container[] | undefined) =>
        (containers ?? []).filter(
          (container) => container.name === SOURCE_CONTAINER || STEP_NAMES.includes(container.name),
        );
      // The pod-level fields stay (a container inherits them); the builder is left out.
      const alone = psaView({
        ...pod,
        initContainers: own(pod.initContainers),
        containers: own(pod.containers),
      });

      expect(restrictedViolations(alone)).toEqual([]);
    },
  );

  it.each(JOBS)('$name: keeps the fixed shape of its method', (rendered) => {
    expect(fixedShapeProblems(rendered.method, rendered.translation, rendered.context)).toEqual([]);
  });
});

// ---- 2. Namespaces by Pod Security level (issue 29) -------------------------------------------

/** The chart's namespaces with buildx on, and one namespace for every level (as before). */
const NAMESPACE_LAYOUTS: ReadonlyArray<readonly [string, NamespacesByLevel]> = [
  [
    'a namespace per level',
    {
      restricted: 'kiln-builds-restricted',
      baseline: 'kiln-builds',
      privileged: 'kiln-builds-privileged',
    },
  ],
  ['one namespace for every level', oneNamespace('kiln-builds')],
];
const LEVELS: readonly PodSecurityLevel[] = ['restricted', 'baseline', 'privileged'];

describe('Pod security by build namespace (issue 29)', () => {
  it.each(NAMESPACE_LAYOUTS)(
    '%s: every Job is written to a namespace whose level admits its pod',
    (_layout, namespaces) => {
      const refused = JOBS.flatMap(({ name, method, translation }) => {
        const namespace = namespaceOfMethod(namespaces, method)!;
        const level = levelOfNamespace(namespaces, namespace)!;
        const pod = psaView(podOf(translation.job));
        return refusedAt(level, pod, translation.job.spec?.template.metadata ?? {}).map(
          (v) => `${name} in ${namespace} (${level}): ${v}`,
        );
      });

      expect(refused).toEqual([]);
    },
  );

  it('refuses a Build in a namespace exactly where Pod Security admission would refuse its pod', () => {
    const namespaces = NAMESPACE_LAYOUTS[0]![1];
    const disagreements = JOBS.flatMap(({ name, method, translation }) =>
      LEVELS.flatMap((level) => {
        const namespace = namespaces[level]!;
        const pod = psaView(podOf(translation.job));
        const admitted =
          refusedAt(level, pod, translation.job.spec?.template.metadata ?? {}).length === 0;
        const accepted = placementProblem(namespaces, namespace, method) === undefined;
        return admitted === accepted
          ? []
          : [`${name} in ${namespace}: admission ${admitted}, kiln ${accepted}`];
      }),
    );

    expect(disagreements).toEqual([]);
    // And it does refuse some: kaniko in the restricted namespace, buildx in the baseline one.
    expect(placementProblem(namespaces, 'kiln-builds-restricted', 'kaniko')).toBeDefined();
    expect(placementProblem(namespaces, 'kiln-builds', 'buildx')).toBeDefined();
  });

  it('runs every method but buildx in a user namespace when asked, at the same level', () => {
    const inUserNamespace = Object.fromEntries(
      METHOD_NAMES.map((method) => {
        const jobs = JOBS.filter((j) => j.method === method && j.context.settings.userNamespaces);
        return [method, [...new Set(jobs.map((j) => podOf(j.translation.job).hostUsers))]];
      }),
    );

    expect(inUserNamespace).toEqual({
      kaniko: [false],
      buildx: [undefined],
      container: [false],
      paketo: [false],
      packer: [false],
    });
  });

  it('takes kaniko’s running as root off the restricted findings in a user namespace, not its capabilities', () => {
    const spec = MANIFESTS.kaniko[0]![1];
    const builderFindings = (settings: JobSettings) => {
      const translation = BUILD_METHODS.kaniko.jobSpec(spec, jobContext(settings));
      if (translation.kind !== 'job') throw new Error(translation.reason);
      return restrictedViolations(psaView(podOf(translation.job))).filter((v) =>
        v.startsWith(`container ${BUILDER_CONTAINER}:`),
      );
    };
    const added = KANIKO_SECURITY_CONTEXT.capabilities?.add ?? [];
    const stillRefused = [
      `container ${BUILDER_CONTAINER}: allowPrivilegeEscalation != false`,
      `container ${BUILDER_CONTAINER}: capabilities drop ALL`,
      ...added.map((cap) => `container ${BUILDER_CONTAINER}: capability ${cap}`),
    ];

    expect(builderFindings({ ...DEFAULT_JOB_SETTINGS, userNamespaces: true }).sort()).toEqual(
      [...stillRefused].sort(),
    );
    expect(builderFindings(DEFAULT_JOB_SETTINGS).sort()).toEqual(
      [
        ...stillRefused,
        `container ${BUILDER_CONTAINER}: runAsNonRoot false`,
        `container ${BUILDER_CONTAINER}: runAsUser 0`,
      ].sort(),
    );
  });
});

// ---- 3. The property: no manifest moves a pod's security ------------------------------------

/**
 * Text that means something to a shell, a flag parser, BuildKit's CSV options, YAML or JSON, and
 * strings that are hard on encoders: every free-text field of a manifest is drawn from these.
 */
const BAIT = [
  '$(id)',
  '`id`',
  '; rm -rf / #',
  '&& curl -s http://169.254.169.254/ | sh',
  '\n',
  "'",
  '"',
  '\\',
  '${IFS}',
  '|',
  '>',
  '*',
  '-c',
  '--privileged',
  '--',
  ',type=local,dest=/',
  '=',
  'hostPath: {path: /}',
  '"privileged": true',
  '../../',
  '/var/run/docker.sock',
  '\u0000',
  '\u202e',
  '💥',
  ' ',
];
const hostile = fc.oneof(
  fc.constantFrom(...BAIT),
  fc.array(fc.constantFrom(...BAIT), { minLength: 1, maxLength: 6 }).map((parts) => parts.join('')),
  fc.string({
    unit: fc.oneof(
      fc.constantFrom(...BAIT),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    ),
    maxLength: 12,
  }),
);
const nonBlank = hostile.filter((text) => text.trim() !== '');
/** A map key the manifest accepts (no whitespace or `=`), otherwise as hostile as the rest. */
const word = hostile.map((text) => text.replace(/[\s=]/g, '')).filter((text) => text !== '');
/** An image reference the manifest accepts: no whitespace, at most 255 characters. */
const reference = hostile
  .map((text) => text.replace(/\s/g, '').slice(0, 200))
  .filter((text) => text !== '');
const envName = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,12}$/) },
  word,
);
const map = (key: fc.Arbitrary<string>) => fc.dictionary(key, hostile, { maxKeys: 4 });
/** A tag the manifest accepts: a plain tag, or a full reference whose repository is hostile. */
const tag = fc.oneof(
  fc.constantFrom('v1', 'latest', '1.0.0'),
  fc
    .tuple(reference, reference)
    .map(([host, name]) => `${host.replace(/[@,]/g, '')}/${name.replace(/[@,/]/g, '') || 'x'}:v1`),
);

/** A registry cache as buildx spells it: a reference, or `type=registry,ref=…[,mode=…]`. */
const cacheReference = fc
  .tuple(
    fc.stringMatching(/^[a-z0-9][a-z0-9._:/-]{0,30}$/),
    fc.constantFrom('', 'type=registry,ref=', 'type=registry,mode=min,ref='),
  )
  .map(([ref, prefix]) => `${prefix}${ref}`);

/** build_config fields every method reads, with hostile text wherever the manifest takes any. */
const commonConfig = fc.record({
  sbom_tool: fc.constantFrom(...SBOM_TOOLS),
  scan_tool: fc.constantFrom(...SCAN_TOOLS),
  registry_type: fc.constant('harbor'),
  secret_manager_type: fc.constant('vault'),
  build_args: fc.option(map(word)),
  target: fc.option(hostile),
  cache: fc.option(fc.boolean()),
  cache_repo: fc.option(reference),
  registry_repository: fc.option(reference),
  build_context: fc.option(fc.oneof(fc.constantFrom('.', 'app', 'a/b'), hostile)),
});

const hclTemplate = hostile.map(
  (text) =>
    `source "amazon-ebs" "base" {\n  ami_name = ${JSON.stringify(text)}\n}\n\nbuild {\n  sources = ["source.amazon-ebs.base"]\n}\n`,
);
const jsonTemplate = fc
  .tuple(
    fc.constantFrom('amazon-ebs', 'googlecompute', 'azure-arm', 'docker', 'qemu'),
    hostile,
    hostile,
  )
  .map(([type, name, command]) =>
    JSON.stringify({
      variables: {},
      builders: [{ type, ami_name: name }],
      provisioners: [{ type: 'shell', inline: [command] }],
    }),
  );

/** Each method's own fields: build_config additions and top-level ones. */
const METHOD_FIELDS: Readonly<Record<MethodName, fc.Arbitrary<{ config: object; top: object }>>> = {
  kaniko: fc.record({ config: fc.record({ dockerfile: nonBlank }), top: fc.constant({}) }),
  buildx: fc.record({
    config: fc.record({
      dockerfile: nonBlank,
      platforms: fc.option(fc.subarray(['linux/amd64', 'linux/arm64', 'linux/arm/v7'])),
      // Mostly what buildx runs (a registry cache, ids it can mount), else the build is refused.
      cache_to: fc.option(fc.oneof({ weight: 4, arbitrary: cacheReference }, hostile), { freq: 2 }),
      cache_from: fc.option(
        fc.array(fc.oneof({ weight: 4, arbitrary: cacheReference }, hostile), { maxLength: 3 }),
        { freq: 2 },
      ),
      secrets: fc.option(
        fc.dictionary(
          fc.oneof({ weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9_.-]{1,20}$/) }, word),
          hostile,
          { maxKeys: 3 },
        ),
      ),
    }),
    top: fc.constant({}),
  }),
  container: fc.record({
    config: fc.constant({}),
    top: fc.record({
      base_image: reference,
      instructions: fc.array(nonBlank, { minLength: 1, maxLength: 4 }),
    }),
  }),
  paketo: fc.record({
    config: fc.record({
      paketo_config: fc.record({
        builder: fc.oneof(fc.constant(PAKETO_BUILDER), reference),
        buildpacks: fc.option(
          fc.array(fc.oneof(fc.constantFrom('paketo-buildpacks/nodejs', 'a/b@1.0'), hostile), {
            maxLength: 3,
          }),
        ),
        env: fc.option(fc.dictionary(envName, hostile, { maxKeys: 4 })),
        build_args: fc.option(fc.dictionary(envName, hostile, { maxKeys: 4 })),
      }),
    }),
    top: fc.constant({}),
  }),
  packer: fc.record({
    config: fc.record({
      packer_template: fc.oneof(hclTemplate, jsonTemplate, nonBlank),
      variables: fc.option(fc.dictionary(word, fc.oneof(hostile, fc.jsonValue()), { maxKeys: 4 })),
    }),
    top: fc.constant({}),
  }),
};

function manifestOf(method: MethodName): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .record({
      name: hostile,
      description: hostile,
      environment: fc.dictionary(envName, hostile, { maxKeys: 4 }),
      tags: fc.array(tag, { minLength: 1, maxLength: 3 }),
      common: commonConfig,
      own: METHOD_FIELDS[method],
    })
    .map(({ common, own, ...top }) => ({
      ...top,
      type: method,
      base_image: '',
      instructions: [],
      ...own.top,
      build_config: { build_type: method, ...common, ...own.config },
    }));
}

const specContextArb: fc.Arbitrary<SpecContext> = fc.record({
  project: fc.record({
    name: hostile,
    gitRepositoryUrl: fc.option(fc.constant(REPOSITORY), { freq: 4 }),
    defaultRegistry: fc.constant(null),
  }),
  defaultRegistry: fc.option(fc.constant('registry.example.com/kiln'), { nil: undefined }),
  timeoutSeconds: fc.integer({ min: 60, max: 86_400 }),
});

/** The operator's side varies too (it is not the user's): steps, credentials, service account. */
const jobContextArb: fc.Arbitrary<JobContext> = fc
  .record({
    namespace: fc.constantFrom('kiln-builds', 'team-a-builds'),
    steps: fc.boolean(),
    userNamespaces: fc.boolean(),
    serviceAccountName: fc.option(fc.constant('kiln-build'), { nil: undefined }),
    credentialsSecret: fc.option(fc.constant('registry-push'), { nil: undefined }),
    buildSecret: fc.boolean(),
    insecure: fc.boolean(),
  })
  .map(
    ({
      namespace,
      steps,
      userNamespaces,
      serviceAccountName,
      credentialsSecret,
      buildSecret,
      insecure,
    }) => {
      const settings: JobSettings = {
        ...DEFAULT_JOB_SETTINGS,
        ...(userNamespaces ? { userNamespaces } : {}),
        steps: steps ? STEPS_ON : DEFAULT_JOB_SETTINGS.steps,
        insecureRegistries: insecure ? ['127.0.0.1:5000'] : [],
        ...(serviceAccountName === undefined ? {} : { serviceAccountName }),
        ...(credentialsSecret === undefined ? {} : { credentialsSecret }),
      };
      return jobContext(settings, {
        namespace,
        ...(buildSecret ? {} : { buildSecretName: undefined }),
      });
    },
  );

describe('Pod security under hostile manifests (property)', () => {
  it.each(METHOD_NAMES)(
    '%s: no accepted manifest changes the service account, privileges, host namespaces, volumes, scripts or namespace',
    (method) => {
      fc.assert(
        fc.property(
          manifestOf(method),
          specContextArb,
          jobContextArb,
          (manifest, specContext, context) => {
            const result = validateManifest(manifest, {
              defaultRegistry: specContext.project.defaultRegistry ?? specContext.defaultRegistry,
            });
            // Only what the API accepts reaches a Job; what a method cannot run never becomes one.
            fc.pre(result.ok);
            const translation = BUILD_METHODS[method].jobSpec(
              specOfManifest(result.manifest, specContext),
              context,
            );
            fc.pre(translation.kind === 'job');
            expect(fixedShapeProblems(method, translation, context)).toEqual([]);
          },
        ),
        { numRuns: 150 },
      );
    },
  );
});
