import type { V1SecurityContext } from '@kubernetes/client-node';

import { type BuildSpec, pushTargets } from '../manifest/build-spec.js';
import {
  contextDirectory,
  FILES_DIR,
  type JobContext,
  OUT_DIR,
  type PodSecurityLevel,
  jobOf,
  type JobTranslation,
  SOURCE_DIR,
  unsupported,
} from './job.js';
import {
  blank,
  type BuildMethod,
  type DockerfilePlan,
  dockerfilePlan,
  NO_EXCLUSIVE_FIELDS,
} from './method.js';
import { stepsConfigured } from './steps.js';
import { MANIFEST_MESSAGES } from '../manifest/types.js';

const at = (key: string): string => `manifest.build_config.${key}`;

const plan = (spec: BuildSpec): DockerfilePlan =>
  dockerfilePlan(spec, spec.config.dockerfile, { ...spec.env, ...spec.buildArgs });

/**
 * kaniko runs as root with capabilities all inside the PSS baseline set (see
 * KANIKO_SECURITY_CONTEXT): its build namespace must allow `baseline`, never `restricted`.
 */
export const POD_SECURITY_LEVEL: PodSecurityLevel = 'baseline';

/**
 * kaniko: an inline Dockerfile pushed to a registry repository. A reference-form build (no inline
 * Dockerfile) is a kaniko build of the repository's own Dockerfile.
 */
export const kaniko: BuildMethod = {
  name: 'kaniko',
  podSecurityLevel: POD_SECURITY_LEVEL,
  logFormat: 'kaniko',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    if (blank(draft.config.dockerfile)) {
      details[at('dockerfile')] ??= MANIFEST_MESSAGES.kanikoDockerfileRequired;
    }
    if (draft.contextGiven === '')
      details[at('build_context')] = MANIFEST_MESSAGES.kanikoContextRequired;
    if (draft.config.registry_repository === undefined && !draft.repositoryFromElsewhere) {
      details[at('registry_repository')] ??= MANIFEST_MESSAGES.kanikoRegistryRepositoryRequired;
    }
  },
  localPlan: plan,
  jobSpec: (spec, context) => kanikoJob(spec, context, plan(spec)),
};

/** What kaniko pushed, one `name:tag@sha256:…` line per destination, under OUT_DIR. */
const KANIKO_PUSHED_FILE = 'image-ref';
/** Where kaniko writes the image of a registry_type s3 build, as an OCI image layout directory. */
export const KANIKO_OCI_LAYOUT = `${OUT_DIR}/oci-layout`;

/** kaniko's Docker config directory: the credentials Secret's `config.json` is mounted here. */
export const KANIKO_DOCKER_CONFIG = '/kaniko/.docker';

/**
 * kaniko runs as root and is not privileged, as the Tekton catalog and Shipwright run it: Tekton
 * catalog's task sets `runAsUser: 0` ("kaniko assumes it is running as root… Adding this
 * securityContext makes it explicit") and Shipwright's sample adds `runAsGroup: 0` and the
 * capabilities CHOWN, DAC_OVERRIDE, FOWNER, SETGID, SETUID, SETFCAP, KILL ("not privileged").
 * kaniko unpacks the base image over its own root filesystem, so that cannot be read-only. Neither
 * sets `allowPrivilegeEscalation`, nor does kiln: the process is root already, and no_new_privs
 * would only break a Dockerfile's `USER app` followed by `RUN sudo …`. No capability is dropped
 * either: RUN steps run in this container with the runtime's default set, as in Shipwright. Every
 * added capability is in the Pod Security Standards' baseline set, so build namespaces can enforce
 * baseline; never restricted (runAsNonRoot).
 */
export const KANIKO_SECURITY_CONTEXT: V1SecurityContext = {
  runAsUser: 0,
  runAsGroup: 0,
  runAsNonRoot: false,
  privileged: false,
  readOnlyRootFilesystem: false,
  capabilities: { add: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID', 'SETFCAP', 'KILL'] },
};

/**
 * The Job of a Dockerfile build run by kaniko (the kaniko method and the `container` method):
 * the plan's inline Dockerfile goes to the ConfigMap, the repository's is read from the checkout.
 * Every user value is one argv element (`--build-arg`, `NAME=value`): no shell sees them.
 */
export function kanikoJob(
  spec: BuildSpec,
  context: JobContext,
  plan: DockerfilePlan,
): JobTranslation {
  if (plan.dockerfile === undefined && spec.source.repository === null) {
    return unsupported('the project has no git repository to build from');
  }
  if (plan.platforms.length > 0) {
    return unsupported(
      `kaniko builds for the node's platform only, not ${plan.platforms.join(', ')}`,
    );
  }
  const contextDir = contextDirectory(spec.source);
  if (typeof contextDir !== 'string') return unsupported(contextDir.problem);

  const { settings } = context;
  const notes: string[] = [];
  const dockerfile =
    plan.dockerfile === undefined
      ? `${SOURCE_DIR}/${plan.dockerfilePath}`
      : `${FILES_DIR}/Dockerfile`;
  const args = [`--dockerfile=${dockerfile}`, `--context=dir://${contextDir}`];

  // registry_type s3: kaniko writes the image as an OCI image layout directory, before and
  // regardless of its push (`--oci-layout-path`, kaniko's README; DoPush in
  // pkg/executor/push.go), and pushes nothing; the s3-upload step archives and uploads it.
  const targets = context.s3 === undefined ? pushTargets(spec.output, context.buildNumber) : [];
  if (context.s3 !== undefined) {
    args.push('--no-push', `--oci-layout-path=${KANIKO_OCI_LAYOUT}`);
  } else if (targets.length === 0) {
    args.push('--no-push');
    notes.push(
      'no registry is configured for this build, so the image is built but not pushed (kaniko --no-push)',
    );
  }
  for (const target of targets) args.push(`--destination=${target}`);
  // For the SBOM and scan steps, when they run: `name@sha256:…` of each destination.
  const reportPush = targets.length > 0 && stepsConfigured(spec, settings.steps);
  if (reportPush) args.push(`--image-name-with-digest-file=${OUT_DIR}/${KANIKO_PUSHED_FILE}`);
  for (const [name, value] of Object.entries(plan.buildArgs)) {
    args.push('--build-arg', `${name}=${value}`);
  }
  if (plan.target !== undefined) args.push(`--target=${plan.target}`);
  if (spec.config.cache === true) {
    const repository =
      spec.config.cache_repo ??
      (spec.output.repository === null ? undefined : `${spec.output.repository}/cache`);
    if (repository === undefined) {
      notes.push('the layer cache is off: no cache_repo and no registry repository to keep it in');
    } else {
      args.push('--cache=true', `--cache-repo=${repository}`);
    }
  }
  for (const registry of settings.insecureRegistries) {
    args.push(`--insecure-registry=${registry}`, `--skip-tls-verify-registry=${registry}`);
  }
  args.push(
    // Shipwright's choice: less memory than a full snapshot.
    '--snapshot-mode=redo',
    // The pushed digest becomes the container's termination message, where the operator reads it.
    '--digest-file=/dev/termination-log',
    // Shipwright's workaround for kaniko#2164.
    '--ignore-path=/product_uuid',
    // Plain lines for LogSink's parser; the pod follower asks the kubelet for timestamps.
    '--log-format=text',
    '--log-timestamp=false',
  );

  return jobOf(spec, context, {
    builder: {
      image: settings.builderImages.kaniko,
      command: ['/kaniko/executor'],
      args,
      env: [{ name: 'DOCKER_CONFIG', value: KANIKO_DOCKER_CONFIG }],
      securityContext: KANIKO_SECURITY_CONTEXT,
      dockerConfigDir: KANIKO_DOCKER_CONFIG,
    },
    files: plan.dockerfile === undefined ? {} : { Dockerfile: plan.dockerfile },
    notes,
    ...(reportPush
      ? { pushedImage: { format: 'image-ref', file: `${OUT_DIR}/${KANIKO_PUSHED_FILE}` } }
      : {}),
    ...(context.s3 === undefined
      ? {}
      : { ociLayout: { format: 'oci-dir', path: KANIKO_OCI_LAYOUT } }),
  });
}
