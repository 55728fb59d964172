import type { V1SecurityContext } from '@kubernetes/client-node';

import { type BuildSpec, pushTargets } from '../manifest/build-spec.js';
import { isPinnedByDigest } from './images.js';
import {
  cacheReference,
  contextDirectory,
  FILES_DIR,
  type JobContext,
  jobOf,
  type JobTranslation,
  OUT_DIR,
  type PodSecurityLevel,
  unsupported,
} from './job.js';
import { type BuildMethod, type LocalPlan, NO_EXCLUSIVE_FIELDS } from './method.js';
import { MANIFEST_MESSAGES } from '../manifest/types.js';

const PAKETO_BIONIC_BUILDER = /^(.+)\/builder:(base|full|tiny)$/;

type PackPlan = Extract<LocalPlan, { kind: 'pack' }>;

/**
 * The Pod Security level a paketo build namespace must allow: **restricted**. The lifecycle runs as
 * the builder's non-root user with no privilege escalation, every capability dropped and the
 * RuntimeDefault seccomp profile, as kpack runs its build pods; the `source` container is
 * restricted already, and the volumes are emptyDir, ConfigMap and Secret.
 */
export const POD_SECURITY_LEVEL: PodSecurityLevel = 'restricted';

/**
 * Paketo (Cloud Native Buildpacks): a builder image, optional buildpacks and platform env. The
 * builder is stored as chosen; `paketoBuilderImage` maps the deprecated names when it runs.
 */
export const paketo: BuildMethod = {
  name: 'paketo',
  podSecurityLevel: POD_SECURITY_LEVEL,
  logFormat: 'pack',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    const builder = draft.config.paketo_config?.builder;
    if (builder === undefined || builder === '') {
      details['manifest.build_config.paketo_config.builder'] ??=
        MANIFEST_MESSAGES.paketoBuilderRequired;
    }
  },
  localPlan: packPlan,
  jobSpec: (spec, context) => paketoJob(spec, context, packPlan(spec)),
};

function packPlan(spec: BuildSpec): PackPlan {
  const config = spec.config.paketo_config ?? {};
  const requested = config.builder ?? '';
  return {
    kind: 'pack',
    builder: paketoBuilderImage(requested).image,
    requestedBuilder: requested,
    buildpacks: config.buildpacks ?? [],
    env: { ...spec.env, ...(config.env ?? {}), ...(config.build_args ?? {}) },
  };
}

/**
 * The builder image a paketo build runs. The wizard offers the deprecated bionic builders
 * `<ns>/builder:base|full|tiny`; they map to the maintained `<ns>/builder-jammy-<tag>:latest`
 * (`mapped: true`, so the caller can say so in the build log). Anything else is used as given.
 */
export function paketoBuilderImage(builder: string): { image: string; mapped: boolean } {
  const match = PAKETO_BIONIC_BUILDER.exec(builder);
  if (match === null) return { image: builder, mapped: false };
  const [, namespace, tag] = match;
  return { image: `${namespace}/builder-jammy-${tag}:latest`, mapped: true };
}

/**
 * The Jammy stacks' build user: uid 1001, gid 1000 (Paketo's Jammy stack images; Shipwright runs
 * its strategy so). The lifecycle must run as the builder's CNB_USER_ID/CNB_GROUP_ID; a builder
 * on another stack with other ids would need them configurable.
 */
export const CNB_USER_ID = 1001;
export const CNB_GROUP_ID = 1000;
/** Shipwright's default Platform API; Jammy lifecycles support 0.7 to 0.15. */
export const CNB_PLATFORM_API = '0.13';
/** Where the credentials Secret's `config.json` is mounted: the `cnb` user's `~/.docker`. */
export const CNB_DOCKER_CONFIG = '/home/cnb/.docker';
/** The lifecycle's report (`-report`): the pushed tags and digest, for the steps after it. */
export const CNB_REPORT_FILE = `${OUT_DIR}/report.toml`;
const LAYERS_DIR = '/layers';
const PLATFORM_DIR = '/platform';
const ORDER_FILE = 'order.toml';

/**
 * The lifecycle's container: the builder's non-root user, no privilege escalation, no capabilities,
 * as kpack's build pod runs it. The root filesystem stays writable: buildpacks write to HOME and
 * /tmp.
 */
export const CNB_SECURITY_CONTEXT: V1SecurityContext = {
  runAsUser: CNB_USER_ID,
  runAsGroup: CNB_GROUP_ID,
  runAsNonRoot: true,
  privileged: false,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/** Platform env names: what a buildpack can read as an environment variable, and a file name. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/**
 * Never written as platform env: a file named PATH broke pip builds, and the others belong to the
 * shell the buildpacks run in (Shipwright's blocklist).
 */
export const PLATFORM_ENV_BLOCKLIST: readonly string[] = [
  'PATH',
  'HOSTNAME',
  'PWD',
  '_',
  'SHLVL',
  'HOME',
];
/** A buildpack id (buildpack spec: letters, digits, `.`, `/`, `-`) and an optional `@version`. */
const BUILDPACK =
  /^(?:urn:cnb:builder:)?([A-Za-z0-9][A-Za-z0-9./-]*)(?:@([A-Za-z0-9][A-Za-z0-9.+_-]*))?$/;

/**
 * The Job of a paketo build: the CNB lifecycle's `creator` in the builder image (detect, build and
 * export in one container, which pack does for trusted builders). The checkout is the app
 * directory. Environment variables are platform env files (one read-only file per variable under
 * /platform/env), never the lifecycle's own environment; no user value reaches a shell.
 */
export function paketoJob(spec: BuildSpec, context: JobContext, plan: PackPlan): JobTranslation {
  if (context.s3 !== undefined) {
    return unsupported(
      'paketo builds cannot use registry_type s3: the buildpacks lifecycle exports its image to a registry, and kiln uploads only an OCI image layout to S3',
    );
  }
  if (spec.source.repository === null) {
    return unsupported('the project has no git repository to build from');
  }
  const appDir = contextDirectory(spec.source);
  if (typeof appDir !== 'string') return unsupported(appDir.problem);
  const targets = pushTargets(spec.output, context.buildNumber);
  const [image, ...moreTags] = targets;
  if (image === undefined) {
    return unsupported(
      'no registry is configured for this build: the buildpacks lifecycle exports its image to a registry',
    );
  }
  const order = orderToml(plan.buildpacks);
  if ('problem' in order) return unsupported(order.problem);
  const env = platformEnv(plan.env);
  if ('problem' in env) return unsupported(env.problem);

  const { settings } = context;
  const notes: string[] = [];
  const builder = paketoBuilderImage(plan.requestedBuilder);
  if (builder.mapped) {
    notes.push(
      `the deprecated builder ${plan.requestedBuilder} is replaced by ${builder.image}, its maintained Jammy successor`,
    );
  }
  if (!isPinnedByDigest(builder.image)) {
    notes.push(
      `the builder image ${builder.image} is not pinned by digest: the build runs whatever its tag names when the node pulls it`,
    );
  }
  notes.push(...env.notes);
  if (Object.keys(spec.config.paketo_config?.build_args ?? {}).length > 0) {
    notes.push(
      'buildpacks take no build arguments: paketo_config.build_args are given to them as platform environment variables (/platform/env)',
    );
  }
  if (Object.keys(spec.buildArgs).length > 0) {
    notes.push(
      'build_config.build_args are not used by paketo builds; paketo_config.build_args are',
    );
  }

  // Flags from the lifecycle's cmd/lifecycle/creator.go.
  const args = [`-app=${appDir}`, `-layers=${LAYERS_DIR}`, `-platform=${PLATFORM_DIR}`];
  if (order.file !== undefined) args.push(`-order=${FILES_DIR}/${ORDER_FILE}`);
  const runImage = settings.paketoRunImages?.[builder.image];
  if (runImage !== undefined) args.push(`-run-image=${runImage}`);
  if (spec.config.cache === true) {
    const cacheImage = cacheReference(spec, 'paketo-cache');
    if (cacheImage === undefined) {
      notes.push('the layer cache is off: no cache_repo and no registry repository to keep it in');
    } else {
      args.push(`-cache-image=${cacheImage}`);
    }
  }
  // -insecure-registry exists from Platform API 0.13 on (CNB_PLATFORM_API).
  for (const registry of settings.insecureRegistries) args.push(`-insecure-registry=${registry}`);
  for (const tag of moreTags) args.push(`-tag=${tag}`);
  args.push(`-report=${CNB_REPORT_FILE}`, '-no-color', image);

  const files: Record<string, string> = { ...env.files };
  if (order.file !== undefined) files[ORDER_FILE] = order.file;
  return jobOf(spec, context, {
    builder: {
      image: builder.image,
      command: ['/cnb/lifecycle/creator'],
      args,
      env: [
        { name: 'CNB_PLATFORM_API', value: CNB_PLATFORM_API },
        { name: 'CNB_USER_ID', value: String(CNB_USER_ID) },
        { name: 'CNB_GROUP_ID', value: String(CNB_GROUP_ID) },
        { name: 'DOCKER_CONFIG', value: CNB_DOCKER_CONFIG },
      ],
      securityContext: CNB_SECURITY_CONTEXT,
      dockerConfigDir: CNB_DOCKER_CONFIG,
    },
    files,
    notes,
    fileMounts: Object.keys(env.files).map((name) => ({
      key: name,
      mountPath: `${PLATFORM_DIR}/env/${name}`,
    })),
    // fsGroup makes the volumes (and the 0400 credentials file) the lifecycle's group.
    podSecurityContext: {
      runAsUser: CNB_USER_ID,
      runAsGroup: CNB_GROUP_ID,
      fsGroup: CNB_GROUP_ID,
      runAsNonRoot: true,
    },
    scratchVolumes: [{ name: 'layers', mountPath: LAYERS_DIR }],
    // The lifecycle writes into the app directory (buildpacks install dependencies there): the
    // checkout is cloned as its user, so it owns it.
    sourceUser: { runAsUser: CNB_USER_ID, runAsGroup: CNB_GROUP_ID },
    pushedImage: { format: 'cnb-report', file: CNB_REPORT_FILE },
  });
}

/**
 * The build's environment as platform env files (`/platform/env/<NAME>`, the value as content, as
 * the CNB platform spec defines them). Blocklisted names are left out with a note; a name that
 * cannot be an environment variable is refused.
 */
function platformEnv(
  env: Readonly<Record<string, string>>,
): { files: Record<string, string>; notes: string[] } | { problem: string } {
  const files: Record<string, string> = {};
  const skipped: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) {
      return {
        problem: `environment variable "${name.slice(0, 80)}" cannot be given to buildpacks: a name is letters, digits and "_", not starting with a digit`,
      };
    }
    if (PLATFORM_ENV_BLOCKLIST.includes(name)) skipped.push(name);
    else files[name] = value;
  }
  const notes =
    skipped.length === 0
      ? []
      : [
          `not given to the buildpacks, since the build's own shell sets them: ${skipped.join(', ')}`,
        ];
  return { files, notes };
}

/**
 * An order.toml with one group of the named buildpacks, in order (the lifecycle's `-order`; its
 * `-buildpacks` flag names a directory, not ids). Only buildpacks the builder carries can run: an
 * id, optionally `@version` or with pack's `urn:cnb:builder:` prefix. None: the builder's order.
 */
function orderToml(buildpacks: readonly string[]): { file?: string } | { problem: string } {
  if (buildpacks.length === 0) return {};
  const lines = ['[[order]]'];
  for (const entry of buildpacks) {
    const match = BUILDPACK.exec(entry);
    if (match === null) {
      return {
        problem: `buildpack "${entry.slice(0, 200)}" cannot run on Kubernetes: name a buildpack of the builder by id or id@version`,
      };
    }
    const [, id, version] = match;
    lines.push('', '  [[order.group]]', `    id = "${id}"`);
    if (version !== undefined) lines.push(`    version = "${version}"`);
  }
  return { file: `${lines.join('\n')}\n` };
}
