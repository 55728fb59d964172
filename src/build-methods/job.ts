import { posix } from 'node:path';

import type {
  V1ConfigMap,
  V1Container,
  V1EnvVar,
  V1Job,
  V1PodSecurityContext,
  V1PodSpec,
  V1ResourceRequirements,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';

import { type BuildSource, type BuildSpec, repositoryOfReference } from '../manifest/build-spec.js';
import {
  BUILDER_IMAGES,
  type BuilderName,
  GIT_IMAGE,
  isPinnedByDigest,
  SBOM_TOOL_IMAGES,
  SCAN_TOOL_IMAGES,
} from './images.js';
import {
  type OciLayoutOutput,
  OUT_DIR,
  OUT_VOLUME,
  type PushedImage,
  type S3UploadTarget,
  STEP_SCRIPT,
  STEP_SECURITY_CONTEXT,
  STEP_TMP_VOLUME,
  type StepSettings,
  stepsOf,
} from './steps.js';

// The builder's output directory, what it pushed or wrote for S3, and the S3 keys belong to the
// steps that read them.
export {
  type OciLayoutOutput,
  OUT_DIR,
  type PushedImage,
  S3_CREDENTIAL_KEYS,
  type S3UploadTarget,
} from './steps.js';
import type { MethodName } from '../manifest/types.js';

/**
 * The shared skeleton of a build Job (docs/adr/0014-job-translation.md): every method's
 * `jobSpec()` decides its builder container and the files it needs, and `jobOf` wraps them in the
 * same Job, pod, source checkout, volumes and labels. Pure: plain JSON objects the API server
 * accepts, nothing read from the cluster or the environment.
 */

export type ImagePullPolicy = 'Always' | 'IfNotPresent' | 'Never';

/** Quantities in Kubernetes notation (`500m`, `2Gi`). */
export interface ResourceAmounts {
  readonly cpu: string;
  readonly memory: string;
  readonly ephemeralStorage: string;
}

export interface ContainerResources {
  readonly requests: ResourceAmounts;
  readonly limits: ResourceAmounts;
}

/** The operator's settings for build Jobs (config wiring fills them; defaults below). */
export interface JobSettings {
  /** Builder images by builder name, each pinned by digest (`name[:tag]@sha256:…`). */
  readonly builderImages: Readonly<Record<BuilderName, string>>;
  /** The `source` init container's image (git and /bin/sh), pinned by digest. */
  readonly gitImage: string;
  readonly resources: {
    /** The builder container. */
    readonly builder: ContainerResources;
    /** The `source` init container (the clone itself lands on the pod's workspace volume). */
    readonly source: ContainerResources;
    /** Each step after the image (image-ref, SBOM, scan, upload); they run one at a time. */
    readonly steps: ContainerResources;
  };
  /** The steps after the image: kiln's image, the upload URL, the tools' images (steps.ts). */
  readonly steps: StepSettings;
  readonly imagePullPolicy: ImagePullPolicy;
  /**
   * A `kubernetes.io/dockerconfigjson` Secret in the build namespace with push (and pull)
   * credentials, mounted as the builder's Docker config; none: anonymous.
   */
  readonly credentialsSecret?: string;
  /** The build pod's service account; none: the namespace's `default`. Its token is never mounted. */
  readonly serviceAccountName?: string;
  /** Registries reached over plain HTTP or with unverified TLS (`host[:port]`). */
  readonly insecureRegistries: readonly string[];
  /**
   * Run images for paketo builds (the CNB lifecycle's `-run-image`), keyed by the builder image a
   * build runs (after `paketoBuilderImage`'s mapping), e.g. a mirror of the builder's own run
   * image. A builder without an entry uses the run image its metadata names.
   */
  readonly paketoRunImages?: Readonly<Record<string, string>>;
}

export const DEFAULT_JOB_SETTINGS: JobSettings = {
  builderImages: BUILDER_IMAGES,
  gitImage: GIT_IMAGE,
  resources: {
    // builders.md §2.1's sample asks requests cpu 1 / memory 2Gi, limit memory 4Gi; kiln also
    // caps CPU and disk, since a tenant's build must not take a node (reliability.md §3.8).
    builder: {
      requests: { cpu: '1', memory: '2Gi', ephemeralStorage: '2Gi' },
      limits: { cpu: '2', memory: '4Gi', ephemeralStorage: '10Gi' },
    },
    source: {
      requests: { cpu: '100m', memory: '128Mi', ephemeralStorage: '256Mi' },
      limits: { cpu: '1', memory: '1Gi', ephemeralStorage: '1Gi' },
    },
    // trivy and grype keep a vulnerability database of several hundred MB in /tmp.
    steps: {
      requests: { cpu: '250m', memory: '512Mi', ephemeralStorage: '1Gi' },
      limits: { cpu: '1', memory: '2Gi', ephemeralStorage: '4Gi' },
    },
  },
  steps: { sbomImages: SBOM_TOOL_IMAGES, scanImages: SCAN_TOOL_IMAGES },
  imagePullPolicy: 'IfNotPresent',
  insecureRegistries: [],
};

/** What the reconciler knows about one build besides its spec. */
export interface JobContext {
  readonly buildId: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly buildNumber: number;
  readonly namespace: string;
  readonly settings: JobSettings;
  /** The name of the build's ConfigMap (`buildObjectName(buildId)`, as the Job's). */
  readonly configMapName: string;
  /** A per-build credentials Secret (e.g. resolved from the secret manager); wins over settings. */
  readonly credentialsSecret?: string;
  /**
   * The build's own Secret, which the reconciler creates before the Job: one key
   * `build-secret.<id>` (BUILD_SECRET_PREFIX) per buildx secret, plus the keys other steps read.
   * The translation's `secretKeys` lists the keys its Job reads. None: a build with secrets
   * cannot run.
   */
  readonly buildSecretName?: string;
  /**
   * The project's git credentials were resolved into the build's Secret (GIT_CREDENTIAL_KEYS):
   * the source container clones with them.
   */
  readonly gitCredentials?: boolean;
  /**
   * registry_type s3: where the image goes (the tenant's settings). The builder writes an OCI
   * layout instead of pushing, and the s3-upload step uploads it; with `credentials`, its keys
   * are in the build's Secret (S3_CREDENTIAL_KEYS), never here.
   */
  readonly s3?: S3UploadTarget;
}

/**
 * A method's answer for one build. `job` and `configMap` carry no ownerReferences: the reconciler
 * adds the Job's controller reference to the Build, creates the ConfigMap (when there is one)
 * before the Job, and once the Job exists points the ConfigMap's ownerReference at the Job (its
 * uid is not known before). `ttlSecondsAfterFinished` is left unset: the reconciler sets it once
 * every log stream is stored. `unsupported` is permanent (the spec cannot run as a Job): fail the
 * build with `reason`, do not retry.
 */
export type JobTranslation =
  | {
      readonly kind: 'job';
      readonly job: V1Job;
      readonly configMap?: V1ConfigMap;
      /**
       * Keys of `context.buildSecretName` the Job mounts (`build-secret.<id>`); absent when it
       * reads none. The reconciler fills them before it creates the Job.
       */
      readonly secretKeys?: readonly string[];
      /** Lines for the build log in kiln's own voice, written before the pod's first line. */
      readonly notes: readonly string[];
    }
  | { readonly kind: 'unsupported'; readonly reason: string };

/** The builder container a method asks for; the skeleton adds name, resources and mounts. */
export interface BuilderContainer {
  readonly image: string;
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly env: readonly V1EnvVar[];
  readonly securityContext: V1SecurityContext;
  /** Where the credentials Secret's `config.json` is mounted (the builder's DOCKER_CONFIG). */
  readonly dockerConfigDir: string;
}

/** A writable emptyDir mounted into the builder alone. */
export interface ScratchVolume {
  readonly name: string;
  readonly mountPath: string;
}

/**
 * What a method decides for its Job (`jobOf` turns it into a JobTranslation). The optional parts
 * add nothing to the Job when absent, so a plan without them gives the Job kaniko's always had.
 */
export interface JobPlan {
  readonly builder: BuilderContainer;
  /** Files for the build's ConfigMap, mounted read-only at FILES_DIR; none: no ConfigMap. */
  readonly files: Readonly<Record<string, string>>;
  readonly notes: readonly string[];
  /**
   * Files of the ConfigMap also mounted one by one, each as a plain read-only file (a `subPath`
   * mount: no `..data` links beside it), for tools that read every entry of a directory.
   */
  readonly fileMounts?: ReadonlyArray<{ readonly key: string; readonly mountPath: string }>;
  /** Pod-level security fields besides the seccomp profile, which stays RuntimeDefault. */
  readonly podSecurityContext?: Omit<V1PodSecurityContext, 'seccompProfile'>;
  /** Writable emptyDirs the builder needs (daemon state, runtime directories). */
  readonly scratchVolumes?: readonly ScratchVolume[];
  /**
   * The user and group the `source` container clones as, so that a non-root builder owns the
   * checkout it writes into; absent: 65532, as SOURCE_SECURITY_CONTEXT.
   */
  readonly sourceUser?: { readonly runAsUser: number; readonly runAsGroup: number };
  /**
   * Keys of the build's Secret (`build-secret.<id>`) mounted as files named as the keys under
   * BUILD_SECRETS_DIR, read-only, mode 0400. Needs `context.buildSecretName`.
   */
  readonly buildSecretKeys?: readonly string[];
  /** Set when the builder pushes: an emptyDir at OUT_DIR is mounted into the builder. */
  readonly pushedImage?: PushedImage;
  /**
   * Set when the builder writes the image as an OCI layout under OUT_DIR instead of pushing it
   * (`context.s3`): OUT_DIR is mounted into the builder, and the s3-upload step follows it.
   */
  readonly ociLayout?: OciLayoutOutput;
}

/**
 * The Pod Security Standards level a method's build namespace must allow (reliability.md §3.8):
 * each method file exports its own `POD_SECURITY_LEVEL`, with the reason, for the table in docs/install-kubernetes.md
 * and the PSA tests.
 */
export type PodSecurityLevel = 'restricted' | 'baseline' | 'privileged';

/** The workspace emptyDir; the repository is cloned into SOURCE_DIR. */
export const WORKSPACE_DIR = '/workspace';
export const SOURCE_DIR = '/workspace/source';
/** Where the ConfigMap (a generated or inline Dockerfile) is mounted, read-only. */
export const FILES_DIR = '/kiln/dockerfile';
/** Where the build's Secret's `build-secret.<id>` keys are mounted, one file per key. */
export const BUILD_SECRETS_DIR = '/kiln/build-secrets';
/** The key prefix of a buildx secret in the build's Secret (`build-secret.<id>`). */
export const BUILD_SECRET_PREFIX = 'build-secret.';
/** The build Secret's key of a secret environment entry: `env.<NAME>`. */
export const ENV_SECRET_PREFIX = 'env.';
/** The build Secret's keys of the project's git credentials. */
export const GIT_CREDENTIAL_KEYS = { username: 'git.username', password: 'git.password' } as const;

/**
 * git asks a credential helper configured through the environment (GIT_CONFIG_COUNT, git 2.31+)
 * for the username and password, which come from the build's Secret: never part of a URL, an
 * argument or a file in the workspace.
 */
function gitCredentialEnv(secret: string): V1EnvVar[] {
  const fromSecret = (name: string, key: string): V1EnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: secret, key } },
  });
  return [
    fromSecret('KILN_GIT_USERNAME', GIT_CREDENTIAL_KEYS.username),
    fromSecret('KILN_GIT_PASSWORD', GIT_CREDENTIAL_KEYS.password),
    { name: 'GIT_CONFIG_COUNT', value: '1' },
    { name: 'GIT_CONFIG_KEY_0', value: 'credential.helper' },
    { name: 'GIT_CONFIG_VALUE_0', value: GIT_CREDENTIAL_HELPER },
  ];
}

/** A credential helper that answers `get` from KILN_GIT_USERNAME and KILN_GIT_PASSWORD. */
export const GIT_CREDENTIAL_HELPER =
  '!f() { test "$1" = get || exit 0; echo "username=$KILN_GIT_USERNAME"; echo "password=$KILN_GIT_PASSWORD"; }; f';

/** The key of a Docker config in a dockerconfigjson Secret, and in the build's own Secret. */
export const REGISTRY_CONFIG_KEY = '.dockerconfigjson';
/**
 * What a method's builder env names as the Secret of an entry that comes from the build's own
 * Secret; `jobOf` puts the real name in (the methods' plans know no object names).
 */
export const BUILD_SECRET_ENV_REF = '<build-secret>';
export const BUILDER_CONTAINER = 'build';
export const SOURCE_CONTAINER = 'source';
/** A ConfigMap holds at most 1 MiB; leave room for its metadata. */
export const MAX_FILES_BYTES = 1_000_000;

/** The Job's and the ConfigMap's name (DESIGN.md: "its Job is `kiln-<buildId>`"). */
export function buildObjectName(buildId: string): string {
  return `kiln-${buildId}`;
}

/** The labels on the Job, its pod template and the ConfigMap. */
export function buildLabels(context: JobContext): Record<string, string> {
  return {
    'app.kubernetes.io/managed-by': 'kiln',
    'app.kubernetes.io/name': 'kiln-build',
    'kiln.dev/build-id': context.buildId,
    'kiln.dev/tenant-id': context.tenantId,
    'kiln.dev/project-id': context.projectId,
  };
}

/** The answer of a method that has no Job yet. */
export function notYetOnKubernetes(method: MethodName): JobTranslation {
  return {
    kind: 'unsupported',
    reason: `${method} builds cannot run on Kubernetes yet; use the local runner`,
  };
}

export function unsupported(reason: string): JobTranslation {
  return { kind: 'unsupported', reason };
}

/**
 * The build context's directory in the pod: under the checkout when there is a repository (and
 * never outside it, as the local runner refuses), else the ConfigMap's directory, which holds the
 * Dockerfile alone. A string is the directory; `{ problem }` says why there is none.
 */
export function contextDirectory(source: BuildSource): string | { problem: string } {
  if (source.repository === null) {
    return posix.resolve(SOURCE_DIR, source.context) === SOURCE_DIR
      ? FILES_DIR
      : {
          problem: `build context ${source.context} names a directory of the repository, but the project has no git repository`,
        };
  }
  const dir = posix.resolve(SOURCE_DIR, source.context);
  return dir === SOURCE_DIR || dir.startsWith(`${SOURCE_DIR}/`)
    ? dir
    : { problem: `build context ${source.context} is outside the source` };
}

/**
 * The registry reference a builder keeps its layer cache in when `cache` is on: `cache_repo`,
 * tagged `tag` unless it names a tag itself, else `<output repository>/cache:<tag>` (kaniko's
 * default repository, made explicit); undefined when neither names a repository.
 */
export function cacheReference(spec: BuildSpec, tag: string): string | undefined {
  const repository =
    spec.config.cache_repo ??
    (spec.output.repository === null ? undefined : `${spec.output.repository}/cache`);
  if (repository === undefined) return undefined;
  return repositoryOfReference(repository) === undefined ? `${repository}:${tag}` : repository;
}

/** Whether `reference` (`host[:port]/repo…`) lives on one of the configured insecure registries. */
export function onInsecureRegistry(reference: string, settings: JobSettings): boolean {
  const host = reference.split('/', 1)[0] ?? '';
  return reference.includes('/') && settings.insecureRegistries.includes(host);
}

/**
 * The `source` init container's script: a constant. The repository URL, branch and commit reach
 * it as positional parameters ($1 $2 $3, after $0), never as text of the script, so nothing a
 * user sends is parsed by the shell. An empty branch means the default branch; an empty commit,
 * the branch's head. `--` ends git's options before the URL; a branch or commit starting with `-`
 * (which the API refuses anyway) is refused here too, so neither can become an option.
 */
export const SOURCE_SCRIPT = [
  'set -eu',
  'for ref in "$2" "$3"; do',
  '  case "$ref" in -*) printf "kiln: refusing a git ref that starts with -: %s\\n" "$ref" >&2; exit 2 ;; esac',
  'done',
  'if [ -n "$2" ]; then',
  `  git clone --no-tags --branch "$2" -- "$1" ${SOURCE_DIR}`,
  'else',
  `  git clone --no-tags -- "$1" ${SOURCE_DIR}`,
  'fi',
  'if [ -n "$3" ]; then',
  `  git -C ${SOURCE_DIR} -c advice.detachedHead=false checkout "$3"`,
  'fi',
  `printf "kiln: checked out %s\\n" "$(git -C ${SOURCE_DIR} rev-parse HEAD)"`,
].join('\n');

/** The shell the source container runs SOURCE_SCRIPT with ($0 is this name). */
export const SOURCE_COMMAND = ['/bin/sh', '-c', SOURCE_SCRIPT, 'kiln-source'] as const;

/**
 * Non-root, no capabilities, no privilege escalation, read-only root: git needs none of them
 * (PSS "restricted"; Shipwright's git step runs the same way, builders.md §3.1). 65532 is the
 * conventional `nonroot` uid of distroless and Chainguard images.
 */
export const SOURCE_SECURITY_CONTEXT: V1SecurityContext = STEP_SECURITY_CONTEXT;

const VOLUME = {
  workspace: 'workspace',
  tmp: 'source-tmp',
  files: 'dockerfile',
  credentials: 'registry-credentials',
  buildSecrets: 'build-secrets',
  out: OUT_VOLUME,
  stepTmp: STEP_TMP_VOLUME,
} as const;

/** Wraps a method's plan in the shared Job skeleton (docs/adr/0014-job-translation.md). */
export function jobOf(spec: BuildSpec, context: JobContext, plan: JobPlan): JobTranslation {
  const filesBytes = Object.values(plan.files).reduce(
    (sum, text) => sum + Buffer.byteLength(text, 'utf8'),
    0,
  );
  if (filesBytes > MAX_FILES_BYTES) {
    return unsupported(
      `the Dockerfile is ${filesBytes} bytes; a build on Kubernetes takes at most ${MAX_FILES_BYTES}`,
    );
  }
  const secretKeys = plan.buildSecretKeys ?? [];
  const envSecretKeys = plan.builder.env.flatMap((variable) =>
    variable.valueFrom?.secretKeyRef?.name === BUILD_SECRET_ENV_REF
      ? [variable.valueFrom.secretKeyRef.key]
      : [],
  );
  if (secretKeys.length + envSecretKeys.length > 0 && context.buildSecretName === undefined) {
    return unsupported(
      'this build has secrets, but the operator gave it no build Secret to mount them from',
    );
  }
  const { settings } = context;
  const name = buildObjectName(context.buildId);
  // Each object gets its own copy: the reconciler may change one without touching the others.
  const labels = (): Record<string, string> => buildLabels(context);
  const repository = spec.source.repository;
  const hasFiles = Object.keys(plan.files).length > 0;
  const credentials = context.credentialsSecret ?? settings.credentialsSecret;

  const volumes: V1Volume[] = [];
  const builderMounts: V1VolumeMount[] = [];
  if (repository !== null) {
    volumes.push({ name: VOLUME.workspace, emptyDir: {} }, { name: VOLUME.tmp, emptyDir: {} });
    builderMounts.push({ name: VOLUME.workspace, mountPath: WORKSPACE_DIR });
  }
  if (hasFiles) {
    volumes.push({
      name: VOLUME.files,
      configMap: { name: context.configMapName, defaultMode: 0o444 },
    });
    builderMounts.push({ name: VOLUME.files, mountPath: FILES_DIR, readOnly: true });
    for (const file of plan.fileMounts ?? []) {
      builderMounts.push({
        name: VOLUME.files,
        mountPath: file.mountPath,
        subPath: file.key,
        readOnly: true,
      });
    }
  }
  if (credentials !== undefined) {
    volumes.push({
      name: VOLUME.credentials,
      secret: {
        secretName: credentials,
        items: [{ key: REGISTRY_CONFIG_KEY, path: 'config.json' }],
        defaultMode: 0o400,
      },
    });
    builderMounts.push({
      name: VOLUME.credentials,
      mountPath: plan.builder.dockerConfigDir,
      readOnly: true,
    });
  }
  if (secretKeys.length > 0) {
    // Only the keys named, never the whole Secret: it also holds other steps' tokens.
    volumes.push({
      name: VOLUME.buildSecrets,
      secret: {
        secretName: context.buildSecretName,
        items: secretKeys.map((key) => ({ key, path: key })),
        defaultMode: 0o400,
      },
    });
    builderMounts.push({ name: VOLUME.buildSecrets, mountPath: BUILD_SECRETS_DIR, readOnly: true });
  }
  if (plan.pushedImage !== undefined || plan.ociLayout !== undefined) {
    volumes.push({ name: VOLUME.out, emptyDir: {} });
    builderMounts.push({ name: VOLUME.out, mountPath: OUT_DIR });
  }
  for (const scratch of plan.scratchVolumes ?? []) {
    volumes.push({ name: scratch.name, emptyDir: {} });
    builderMounts.push({ name: scratch.name, mountPath: scratch.mountPath });
  }

  const builder: V1Container = {
    name: BUILDER_CONTAINER,
    image: plan.builder.image,
    imagePullPolicy: settings.imagePullPolicy,
    command: [...plan.builder.command],
    args: [...plan.builder.args],
    // A secret env entry names the build's Secret by a placeholder: the method knows no names.
    env: plan.builder.env.map((variable) =>
      variable.valueFrom?.secretKeyRef?.name === BUILD_SECRET_ENV_REF
        ? {
            name: variable.name,
            valueFrom: {
              secretKeyRef: {
                name: context.buildSecretName!,
                key: variable.valueFrom.secretKeyRef.key,
              },
            },
          }
        : variable,
    ),
    resources: resourcesOf(settings.resources.builder),
    securityContext: plan.builder.securityContext,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: builderMounts,
  };

  // The steps after the image (steps.ts): when there are any, the builder becomes an init
  // container, so that they run after it, in order, and only when it succeeded.
  const steps = stepsOf({
    spec,
    buildId: context.buildId,
    projectId: context.projectId,
    buildNumber: context.buildNumber,
    settings: settings.steps,
    pushed: plan.pushedImage,
    ociLayout: plan.ociLayout,
    s3: context.s3,
    buildSecretName: context.buildSecretName,
    credentialsSecretVolume: credentials === undefined ? undefined : VOLUME.credentials,
    insecureRegistries: settings.insecureRegistries,
    resources: resourcesOf(settings.resources.steps),
    imagePullPolicy: settings.imagePullPolicy,
  });
  if (steps.kind === 'unsupported') return unsupported(steps.reason);
  const initContainers =
    repository === null
      ? []
      : [
          sourceContainer(
            spec.source,
            repository,
            settings,
            plan.sourceUser,
            context.gitCredentials === true ? context.buildSecretName : undefined,
          ),
        ];
  let containers = [builder];
  if (steps.kind === 'steps') {
    initContainers.push(builder, ...steps.initContainers);
    containers = [...steps.containers];
    volumes.push({ name: VOLUME.stepTmp, emptyDir: {} });
  }
  const allSecretKeys = [
    ...secretKeys,
    ...(context.gitCredentials === true &&
    repository !== null &&
    context.buildSecretName !== undefined
      ? [GIT_CREDENTIAL_KEYS.username, GIT_CREDENTIAL_KEYS.password]
      : []),
    ...envSecretKeys,
    ...(credentials !== undefined && credentials === context.buildSecretName
      ? [REGISTRY_CONFIG_KEY]
      : []),
    ...(steps.kind === 'steps' ? steps.secretKeys : []),
  ];

  const pod: V1PodSpec = {
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    ...(settings.serviceAccountName === undefined
      ? {}
      : { serviceAccountName: settings.serviceAccountName }),
    securityContext: { ...plan.podSecurityContext, seccompProfile: { type: 'RuntimeDefault' } },
    ...(initContainers.length === 0 ? {} : { initContainers }),
    containers,
    volumes,
  };

  const job: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: context.namespace, labels: labels() },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: spec.timeoutSeconds,
      template: { metadata: { labels: labels() }, spec: pod },
    },
  };
  const configMap: V1ConfigMap | undefined = hasFiles
    ? {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: context.configMapName, namespace: context.namespace, labels: labels() },
        immutable: true,
        data: { ...plan.files },
      }
    : undefined;
  // A deep copy: the Job shares no object with this module's constants or with the plan.
  return structuredClone({
    kind: 'job',
    job,
    ...(configMap === undefined ? {} : { configMap }),
    ...(allSecretKeys.length === 0 ? {} : { secretKeys: allSecretKeys }),
    notes: [...plan.notes, ...steps.notes],
  });
}

function sourceContainer(
  source: BuildSource,
  repository: string,
  settings: JobSettings,
  user: JobPlan['sourceUser'],
  credentialsSecret: string | undefined,
): V1Container {
  return {
    name: SOURCE_CONTAINER,
    image: settings.gitImage,
    imagePullPolicy: settings.imagePullPolicy,
    command: [...SOURCE_COMMAND],
    args: [repository, source.branch ?? '', source.commit ?? ''],
    env: [
      // HOME must be writable and readable by the non-root user (git reads its config there).
      { name: 'HOME', value: '/tmp' },
      // Fail instead of waiting for a password on a terminal there is none of.
      { name: 'GIT_TERMINAL_PROMPT', value: '0' },
      // The URL schemes a project may name (projects.service.ts); no file://, ext:: or http://.
      { name: 'GIT_ALLOW_PROTOCOL', value: 'https:ssh:git' },
      ...(credentialsSecret === undefined ? [] : gitCredentialEnv(credentialsSecret)),
    ],
    workingDir: WORKSPACE_DIR,
    resources: resourcesOf(settings.resources.source),
    securityContext: { ...SOURCE_SECURITY_CONTEXT, ...user },
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [
      { name: VOLUME.workspace, mountPath: WORKSPACE_DIR },
      { name: VOLUME.tmp, mountPath: '/tmp' },
    ],
  };
}

function resourcesOf(resources: ContainerResources): V1ResourceRequirements {
  const quantities = (amounts: ResourceAmounts) => ({
    cpu: amounts.cpu,
    memory: amounts.memory,
    'ephemeral-storage': amounts.ephemeralStorage,
  });
  return { requests: quantities(resources.requests), limits: quantities(resources.limits) };
}

/**
 * The hardening rules every build Job keeps (reliability.md §3.8, ADR 0014), as problems found in
 * `job`: empty when it keeps them all. The table tests check every translation with it; the
 * reconciler may check a Job with it before creating one.
 */
export function hardeningProblems(job: V1Job): string[] {
  const problems: string[] = [];
  const spec = job.spec;
  const pod = spec?.template.spec;
  if (spec === undefined || pod === undefined) return ['the Job has no pod template'];
  if (spec.backoffLimit !== 0) problems.push('backoffLimit must be 0');
  if (!Number.isInteger(spec.activeDeadlineSeconds) || (spec.activeDeadlineSeconds ?? 0) <= 0) {
    problems.push('activeDeadlineSeconds must be a positive integer');
  }
  if (spec.ttlSecondsAfterFinished !== undefined) {
    problems.push('ttlSecondsAfterFinished is set only after the logs are stored');
  }
  if ((job.metadata?.ownerReferences ?? []).length > 0) {
    problems.push('ownerReferences are set by the reconciler');
  }
  for (const [where, labels] of [
    ['Job', job.metadata?.labels],
    ['pod template', spec.template.metadata?.labels],
  ] as const) {
    if (labels?.['app.kubernetes.io/managed-by'] !== 'kiln')
      problems.push(`the ${where} must carry app.kubernetes.io/managed-by=kiln`);
    for (const key of ['kiln.dev/build-id', 'kiln.dev/tenant-id', 'kiln.dev/project-id']) {
      if (!labels?.[key]) problems.push(`the ${where} must carry ${key}`);
    }
  }
  if (pod.restartPolicy !== 'Never') problems.push('restartPolicy must be Never');
  if (pod.automountServiceAccountToken !== false)
    problems.push('automountServiceAccountToken must be false');
  if (pod.enableServiceLinks !== false) problems.push('enableServiceLinks must be false');
  for (const key of Object.keys(pod)) {
    if (key.startsWith('host')) problems.push(`the pod must not set ${key}`);
  }
  if (pod.securityContext?.seccompProfile?.type !== 'RuntimeDefault')
    problems.push('the pod must use the RuntimeDefault seccomp profile');
  for (const volume of pod.volumes ?? []) {
    if (volume.hostPath !== undefined) problems.push(`volume ${volume.name} is a hostPath`);
  }
  for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
    problems.push(...containerProblems(container));
  }
  return problems;
}

function containerProblems(container: V1Container): string[] {
  const problems: string[] = [];
  const at = `container ${container.name}`;
  if (container.image === undefined || !isPinnedByDigest(container.image))
    problems.push(`${at}: image ${container.image ?? '(none)'} is not pinned by digest`);
  for (const kind of ['requests', 'limits'] as const) {
    for (const resource of ['cpu', 'memory', 'ephemeral-storage']) {
      if (container.resources?.[kind]?.[resource] === undefined)
        problems.push(`${at}: no ${resource} in resources.${kind}`);
    }
  }
  if (container.securityContext === undefined) problems.push(`${at}: no securityContext`);
  if (container.securityContext?.privileged === true) problems.push(`${at}: privileged`);
  if (container.terminationMessagePolicy !== 'FallbackToLogsOnError')
    problems.push(`${at}: terminationMessagePolicy must be FallbackToLogsOnError`);
  const argv = [...(container.command ?? []), ...(container.args ?? [])];
  argv.forEach((arg, index) => {
    if (arg === '-c' && index > 0 && /(?:^|\/)(?:ba|da|a)?sh$/.test(argv[index - 1] ?? '')) {
      if (argv[index + 1] !== SOURCE_SCRIPT && argv[index + 1] !== STEP_SCRIPT)
        problems.push(`${at}: a shell runs a script other than kiln's constant scripts`);
    }
  });
  return problems;
}
