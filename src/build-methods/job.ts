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
import { type ContainerResources, type JobSettings, type ResourceAmounts } from './job-settings.js';
import {
  GIT_CREDENTIAL_KEYS,
  SOURCE_DIR,
  SOURCE_VOLUMES,
  sourceContainer,
  WORKSPACE_DIR,
} from './source-container.js';
import {
  type OciLayoutOutput,
  OUT_DIR,
  OUT_VOLUME,
  type PushedImage,
  type S3UploadTarget,
  STEP_TMP_VOLUME,
  stepsOf,
  type StepsPlan,
} from './steps.js';

// The builder's output directory, what it pushed or wrote for S3, and the S3 keys belong to the
// steps that read them; the source checkout to its container; the hardening rules and the
// operator's settings to their own files. Methods, the operator and the tests import them all
// from here.
export {
  type OciLayoutOutput,
  OUT_DIR,
  type PushedImage,
  S3_CREDENTIAL_KEYS,
  type S3UploadTarget,
} from './steps.js';
export {
  GIT_CREDENTIAL_HELPER,
  GIT_CREDENTIAL_KEYS,
  SOURCE_COMMAND,
  SOURCE_CONTAINER,
  SOURCE_DIR,
  SOURCE_SCRIPT,
  SOURCE_SECURITY_CONTEXT,
  WORKSPACE_DIR,
} from './source-container.js';
export { hardeningProblems } from './hardening.js';
export {
  type ContainerResources,
  DEFAULT_JOB_SETTINGS,
  type ImagePullPolicy,
  type JobSettings,
  type ResourceAmounts,
} from './job-settings.js';

/**
 * The shared skeleton of a build Job (docs/adr/0014-job-translation.md): every method's
 * `jobSpec()` decides its builder container and the files it needs, and `jobOf` wraps them in the
 * same Job, pod, source checkout, volumes and labels. Pure: plain JSON objects the API server
 * accepts, nothing read from the cluster or the environment.
 */

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
  /**
   * Set by packer: the packer-manifest step follows the builder (steps.ts), reading `template`
   * and the manifest the template writes relative to `workingDir`, through read-only copies of
   * the builder's mounts that are not Secrets.
   */
  readonly packerManifest?: { readonly template: string; readonly workingDir: string };
  /**
   * Why the builder cannot run in a user namespace: with `settings.userNamespaces` its pod then
   * keeps the node's user ids, and the build log says why. Absent: it can, and does when asked.
   */
  readonly noUserNamespace?: string;
}

/**
 * The Pod Security Standards level a method's build namespace must allow: each method file exports
 * its own `POD_SECURITY_LEVEL`, with the reason, for the table in docs/install-kubernetes.md and
 * the PSA tests.
 */
export type PodSecurityLevel = 'restricted' | 'baseline' | 'privileged';

/** Where the ConfigMap (a generated or inline Dockerfile) is mounted, read-only. */
export const FILES_DIR = '/kiln/dockerfile';
/** Where the build's Secret's `build-secret.<id>` keys are mounted, one file per key. */
export const BUILD_SECRETS_DIR = '/kiln/build-secrets';
/** The key prefix of a buildx secret in the build's Secret (`build-secret.<id>`). */
export const BUILD_SECRET_PREFIX = 'build-secret.';
/** The build Secret's key of a secret environment entry: `env.<NAME>`. */
export const ENV_SECRET_PREFIX = 'env.';

/** The key of a Docker config in a dockerconfigjson Secret, and in the build's own Secret. */
export const REGISTRY_CONFIG_KEY = '.dockerconfigjson';
/**
 * What a method's builder env names as the Secret of an entry that comes from the build's own
 * Secret; `jobOf` puts the real name in (the methods' plans know no object names).
 */
export const BUILD_SECRET_ENV_REF = '<build-secret>';
export const BUILDER_CONTAINER = 'build';
/** A ConfigMap holds at most 1 MiB; leave room for its metadata. */
export const MAX_FILES_BYTES = 1_000_000;

/**
 * The Job's and the ConfigMap's name, `kiln-<buildId>`: deterministic, so a second create of a
 * build's Job answers AlreadyExists (the reconciler adopts it) instead of starting another.
 */
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

const VOLUME = {
  ...SOURCE_VOLUMES,
  files: 'dockerfile',
  credentials: 'registry-credentials',
  buildSecrets: 'build-secrets',
  out: OUT_VOLUME,
  stepTmp: STEP_TMP_VOLUME,
} as const;

/** Wraps a method's plan in the shared Job skeleton (docs/adr/0014-job-translation.md). */
export function jobOf(spec: BuildSpec, context: JobContext, plan: JobPlan): JobTranslation {
  const problem = planProblem(context, plan);
  if (problem !== undefined) return unsupported(problem);
  const { settings } = context;
  const repository = spec.source.repository;
  const credentials = context.credentialsSecret ?? settings.credentialsSecret;
  const { volumes, builderMounts } = builderVolumes(
    context,
    plan,
    repository !== null,
    credentials,
  );
  const builder = builderContainer(context, plan, builderMounts);

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
    packerManifest:
      plan.packerManifest === undefined
        ? undefined
        : { ...plan.packerManifest, mounts: readOnlyMounts(builderMounts, volumes) },
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
            {
              image: settings.gitImage,
              imagePullPolicy: settings.imagePullPolicy,
              resources: resourcesOf(settings.resources.source),
            },
            plan.sourceUser,
            context.gitCredentials === true ? context.buildSecretName : undefined,
          ),
        ];
  let containers = [builder];
  if (steps.kind === 'steps') {
    initContainers.push(builder, ...steps.initContainers);
    containers = [...steps.containers];
    const stepContainers = [...steps.initContainers, ...steps.containers];
    if (stepContainers.some((c) => c.volumeMounts?.some((m) => m.name === VOLUME.stepTmp))) {
      volumes.push({ name: VOLUME.stepTmp, emptyDir: {} });
    }
  }
  const secretKeys = jobSecretKeys(context, plan, repository !== null, credentials, steps);

  const userNamespace = settings.userNamespaces === true && plan.noUserNamespace === undefined;
  const pod: V1PodSpec = {
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    ...(userNamespace ? { hostUsers: false } : {}),
    ...(settings.serviceAccountName === undefined
      ? {}
      : { serviceAccountName: settings.serviceAccountName }),
    securityContext: { ...plan.podSecurityContext, seccompProfile: { type: 'RuntimeDefault' } },
    ...(initContainers.length === 0 ? {} : { initContainers }),
    containers,
    volumes,
  };
  const { job, configMap } = jobObjects(spec, context, plan, pod);
  // A deep copy: the Job shares no object with this module's constants or with the plan.
  return structuredClone({
    kind: 'job',
    job,
    ...(configMap === undefined ? {} : { configMap }),
    ...(secretKeys.length === 0 ? {} : { secretKeys }),
    notes: [...plan.notes, ...userNamespaceNotes(settings, plan), ...steps.notes],
  });
}

/** Says so when user namespaces are on but the method's builder cannot run in one. */
function userNamespaceNotes(settings: JobSettings, plan: JobPlan): string[] {
  if (settings.userNamespaces !== true || plan.noUserNamespace === undefined) return [];
  return [
    `user namespaces are on (KILN_BUILD_USER_NAMESPACES), but ${plan.noUserNamespace}: this build's pod runs with the node's user ids`,
  ];
}

/** Why a plan cannot become a Job (its files too big, or secrets with no Secret); else undefined. */
function planProblem(context: JobContext, plan: JobPlan): string | undefined {
  const filesBytes = Object.values(plan.files).reduce(
    (sum, text) => sum + Buffer.byteLength(text, 'utf8'),
    0,
  );
  if (filesBytes > MAX_FILES_BYTES) {
    return `the Dockerfile is ${filesBytes} bytes; a build on Kubernetes takes at most ${MAX_FILES_BYTES}`;
  }
  const secretKeys = plan.buildSecretKeys ?? [];
  if (secretKeys.length + envSecretKeys(plan).length > 0 && context.buildSecretName === undefined) {
    return 'this build has secrets, but the operator gave it no build Secret to mount them from';
  }
  return undefined;
}

/** The keys of the build's Secret the builder's env entries read (BUILD_SECRET_ENV_REF). */
function envSecretKeys(plan: JobPlan): string[] {
  return plan.builder.env.flatMap((variable) =>
    variable.valueFrom?.secretKeyRef?.name === BUILD_SECRET_ENV_REF
      ? [variable.valueFrom.secretKeyRef.key]
      : [],
  );
}

/** The pod's volumes so far (the steps may add theirs) and where the builder mounts them. */
function builderVolumes(
  context: JobContext,
  plan: JobPlan,
  hasRepository: boolean,
  credentials: string | undefined,
): { volumes: V1Volume[]; builderMounts: V1VolumeMount[] } {
  const secretKeys = plan.buildSecretKeys ?? [];
  const volumes: V1Volume[] = [];
  const builderMounts: V1VolumeMount[] = [];
  if (hasRepository) {
    volumes.push({ name: VOLUME.workspace, emptyDir: {} }, { name: VOLUME.tmp, emptyDir: {} });
    builderMounts.push({ name: VOLUME.workspace, mountPath: WORKSPACE_DIR });
  }
  if (Object.keys(plan.files).length > 0) {
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
  return { volumes, builderMounts };
}

/** Read-only copies of `mounts` whole volumes that are not Secrets (for a step to read). */
function readOnlyMounts(
  mounts: readonly V1VolumeMount[],
  volumes: readonly V1Volume[],
): V1VolumeMount[] {
  const secrets = new Set(volumes.filter((v) => v.secret !== undefined).map((v) => v.name));
  return mounts
    .filter((mount) => mount.subPath === undefined && !secrets.has(mount.name))
    .map((mount) => ({ name: mount.name, mountPath: mount.mountPath, readOnly: true }));
}

function builderContainer(
  context: JobContext,
  plan: JobPlan,
  volumeMounts: V1VolumeMount[],
): V1Container {
  const { settings } = context;
  return {
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
    volumeMounts,
  };
}

/** Every key of the build's Secret the Job reads, for the reconciler to fill (JobTranslation). */
function jobSecretKeys(
  context: JobContext,
  plan: JobPlan,
  hasRepository: boolean,
  credentials: string | undefined,
  steps: Exclude<StepsPlan, { kind: 'unsupported' }>,
): string[] {
  return [
    ...(plan.buildSecretKeys ?? []),
    ...(context.gitCredentials === true && hasRepository && context.buildSecretName !== undefined
      ? [GIT_CREDENTIAL_KEYS.username, GIT_CREDENTIAL_KEYS.password]
      : []),
    ...envSecretKeys(plan),
    ...(credentials !== undefined && credentials === context.buildSecretName
      ? [REGISTRY_CONFIG_KEY]
      : []),
    ...(steps.kind === 'steps' ? steps.secretKeys : []),
  ];
}

/** The Job around `pod`, and the ConfigMap of the plan's files when it has any. */
function jobObjects(
  spec: BuildSpec,
  context: JobContext,
  plan: JobPlan,
  pod: V1PodSpec,
): { job: V1Job; configMap: V1ConfigMap | undefined } {
  const name = buildObjectName(context.buildId);
  // Each object gets its own copy: the reconciler may change one without touching the others.
  const labels = (): Record<string, string> => buildLabels(context);
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
  const configMap: V1ConfigMap | undefined =
    Object.keys(plan.files).length > 0
      ? {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: context.configMapName, namespace: context.namespace, labels: labels() },
          immutable: true,
          data: { ...plan.files },
        }
      : undefined;
  return { job, configMap };
}

function resourcesOf(resources: ContainerResources): V1ResourceRequirements {
  const quantities = (amounts: ResourceAmounts) => ({
    cpu: amounts.cpu,
    memory: amounts.memory,
    'ephemeral-storage': amounts.ephemeralStorage,
  });
  return { requests: quantities(resources.requests), limits: quantities(resources.limits) };
}
