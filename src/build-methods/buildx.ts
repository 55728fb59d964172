import type { V1SecurityContext } from '@kubernetes/client-node';

import { type BuildSpec, pushTargets } from '../manifest/build-spec.js';
import { nonEmpty, optionalString, stringArray, stringMap } from '../manifest/fields.js';
import {
  BUILD_SECRET_PREFIX,
  BUILD_SECRETS_DIR,
  cacheReference,
  contextDirectory,
  FILES_DIR,
  type JobContext,
  jobOf,
  type JobTranslation,
  onInsecureRegistry,
  OUT_DIR,
  type PodSecurityLevel,
  SOURCE_DIR,
  unsupported,
} from './job.js';
import { blank, type BuildMethod, type DockerfilePlan, dockerfilePlan } from './method.js';
import { MANIFEST_MESSAGES } from '../manifest/types.js';

const PLATFORM_PATTERN = /^[a-z0-9]+\/[a-z0-9_]+(?:\/[a-z0-9]+)?$/;

const plan = (spec: BuildSpec): DockerfilePlan =>
  dockerfilePlan(spec, spec.config.dockerfile, { ...spec.env, ...spec.buildArgs });

/**
 * The Pod Security level a buildx build namespace must allow: **privileged**. Rootless BuildKit
 * needs seccomp and AppArmor `Unconfined` (unshare and mount for its user namespace; BuildKit's
 * docs: "you still need to pass `--security-opt seccomp=unconfined --security-opt
 * apparmor=unconfined`"), and PSS baseline forbids both (baseline allows no `Unconfined` seccomp
 * profile and no AppArmor override), so only a privileged namespace admits it. It runs as uid 1000,
 * not privileged, with the runtime's default capabilities; `--oci-worker-no-process-sandbox` lets
 * RUN steps signal (and perhaps ptrace) the daemon in the same container, which holds nothing but
 * this build.
 */
export const POD_SECURITY_LEVEL: PodSecurityLevel = 'privileged';

/** buildx (BuildKit): an inline Dockerfile, with platforms, registry cache and secret mounts. */
export const buildx: BuildMethod = {
  name: 'buildx',
  podSecurityLevel: POD_SECURITY_LEVEL,
  logFormat: 'buildkit',
  exclusiveFields: ['platforms', 'cache_to', 'cache_from', 'secrets'],
  readExclusiveFields(config, path, details) {
    const platforms = stringArray(config.platforms, `${path}.platforms`, details);
    platforms?.forEach((platform, index) => {
      if (!PLATFORM_PATTERN.test(platform)) {
        details[`${path}.platforms.${index}`] =
          `"${platform}" must look like os/arch[/variant], for example linux/amd64 or linux/arm64/v8`;
      }
    });
    return {
      platforms,
      cache_to: nonEmpty(optionalString(config.cache_to, `${path}.cache_to`, details)?.trim()),
      cache_from: stringArray(config.cache_from, `${path}.cache_from`, details),
      secrets: stringMap(config.secrets, `${path}.secrets`, details),
    };
  },
  check(draft, details) {
    if (blank(draft.config.dockerfile)) {
      details['manifest.build_config.dockerfile'] ??= MANIFEST_MESSAGES.buildxDockerfileRequired;
    }
  },
  localPlan: plan,
  jobSpec: (spec, context) => buildxJob(spec, context, plan(spec)),
};

/** The rootless image's user (uid 1000 maps to root in its user namespace). */
const BUILDKIT_USER = 1000;
const BUILDKIT_HOME = '/home/user';
/** Where the credentials Secret's `config.json` is mounted: the image user's `~/.docker`. */
export const BUILDKIT_DOCKER_CONFIG = `${BUILDKIT_HOME}/.docker`;
/** Where buildctl writes what it pushed (`containerimage.digest`, `image.name`). */
export const BUILDKIT_METADATA_FILE = `${OUT_DIR}/buildkit-metadata.json`;
/** Where BuildKit's OCI exporter writes the image of a registry_type s3 build. */
export const BUILDKIT_OCI_TARBALL = `${OUT_DIR}/image.oci.tar`;

/**
 * Rootless BuildKit's container security context, after BuildKit's
 * examples/kubernetes/job.rootless.yaml and Shipwright's buildkit strategy: uid/gid 1000 (the
 * image's user; another needs a rebuilt image), seccomp and AppArmor `Unconfined` at container
 * level, so the `source` container keeps RuntimeDefault. No_new_privs stays off
 * (`allowPrivilegeEscalation: true`, as Shipwright sets it): rootlesskit maps the user namespace
 * with the setuid `newuidmap`/`newgidmap`. Not privileged, no capability added (the runtime's
 * default set has SETUID/SETGID, which Shipwright adds back only because Tekton drops them). The
 * root filesystem stays writable: buildctl-daemonless.sh makes its temporary directory under /tmp.
 */
export const BUILDKIT_SECURITY_CONTEXT: V1SecurityContext = {
  runAsUser: BUILDKIT_USER,
  runAsGroup: BUILDKIT_USER,
  runAsNonRoot: true,
  privileged: false,
  allowPrivilegeEscalation: true,
  seccompProfile: { type: 'Unconfined' },
  appArmorProfile: { type: 'Unconfined' },
};

/**
 * Why rootless BuildKit cannot run in a pod's user namespace (`hostUsers: false`): rootlesskit
 * maps its own user namespace from the image's subordinate ids (`/etc/subuid`: 100000 and up),
 * and a pod's user namespace holds only ids 0–65535. BuildKit's other shape for user namespaces
 * (its job.userns.yaml: the rootful image, `privileged: true` inside the pod's user namespace) is
 * another builder, and still Pod Security privileged.
 */
export const BUILDKIT_NO_USER_NAMESPACE =
  'rootless BuildKit maps subordinate user ids (100000 and up) that a pod user namespace does not hold';

/** BuildKit secret ids kiln accepts: they become file and Secret key names, and CSV values. */
const SECRET_ID = /^[A-Za-z0-9_.-]{1,200}$/;
/** A registry reference as a cache location: no spaces, commas, quotes or `=` for the CSV. */
const CACHE_REFERENCE = /^[A-Za-z0-9][A-Za-z0-9._:/@-]*$/;

/**
 * The Job of a buildx build: `buildctl-daemonless.sh build` in the rootless BuildKit image
 * (BuildKit's examples/buildctl-daemonless), which starts a buildkitd for this build alone. Every
 * user value is one argv element; the script hands them to buildctl as `"$@"`, so no shell parses
 * them. Secret values never enter the Job: they are files of the build's Secret.
 */
export function buildxJob(
  spec: BuildSpec,
  context: JobContext,
  dockerfile: DockerfilePlan,
): JobTranslation {
  if (dockerfile.dockerfile === undefined && spec.source.repository === null) {
    return unsupported('the project has no git repository to build from');
  }
  const contextDir = contextDirectory(spec.source);
  if (typeof contextDir !== 'string') return unsupported(contextDir.problem);
  const secretIds = Object.keys(spec.config.secrets ?? {});
  const badId = secretIds.find((id) => !SECRET_ID.test(id));
  if (badId !== undefined) {
    return unsupported(
      `buildx secret id "${badId.slice(0, 80)}" cannot be mounted: ids are 1 to 200 letters, digits, ".", "_" or "-"`,
    );
  }
  const cache = cacheFlags(spec, context);
  if ('problem' in cache) return unsupported(cache.problem);

  const { settings } = context;
  const notes: string[] = [...cache.notes];
  const dockerfileDir = dockerfile.dockerfile === undefined ? SOURCE_DIR : FILES_DIR;
  const args = [
    'build',
    // The flags below are buildctl's (BuildKit's README), as Shipwright's strategy passes them.
    '--frontend=dockerfile.v0',
    `--local=context=${contextDir}`,
    `--local=dockerfile=${dockerfileDir}`,
    `--opt=filename=${dockerfile.dockerfile === undefined ? dockerfile.dockerfilePath : 'Dockerfile'}`,
  ];
  if (dockerfile.target !== undefined) args.push(`--opt=target=${dockerfile.target}`);
  for (const [name, value] of Object.entries(dockerfile.buildArgs)) {
    args.push(`--opt=build-arg:${name}=${value}`);
  }
  // One option for every platform: BuildKit builds them all and pushes one image index.
  if (dockerfile.platforms.length > 0) {
    args.push(`--opt=platform=${dockerfile.platforms.join(',')}`);
  }
  const secretKeys = secretIds.map((id) => `${BUILD_SECRET_PREFIX}${id}`);
  secretIds.forEach((id, index) => {
    args.push(`--secret=id=${id},src=${BUILD_SECRETS_DIR}/${secretKeys[index]}`);
  });
  args.push(...cache.args);

  // registry_type s3: BuildKit's OCI exporter writes an OCI image layout tarball (an image
  // index for several platforms) for the s3-upload step; nothing is pushed (BuildKit's README,
  // "Exporting OCI Image Format tarball to client").
  const targets = context.s3 === undefined ? pushTargets(spec.output, context.buildNumber) : [];
  if (context.s3 !== undefined) {
    args.push(`--output=type=oci,dest=${BUILDKIT_OCI_TARBALL}`);
  } else if (targets.length === 0) {
    notes.push(
      'no registry is configured for this build, so the image is built but not pushed (BuildKit without an image output)',
    );
  } else {
    // `name` holds commas when there are several targets: CSV-quote the field, as BuildKit's
    // README does for pushing to several registries.
    const name = targets.length === 1 ? `name=${targets[0]}` : `"name=${targets.join(',')}"`;
    const insecure = targets.some((target) => onInsecureRegistry(target, settings));
    args.push(
      `--output=type=image,${name},push=true${insecure ? ',registry.insecure=true' : ''}`,
      `--metadata-file=${BUILDKIT_METADATA_FILE}`,
    );
  }
  args.push('--progress=plain');

  return jobOf(spec, context, {
    builder: {
      image: settings.builderImages.buildkit,
      command: ['buildctl-daemonless.sh'],
      args,
      env: [
        // No process sandbox, since Kubernetes has no equivalent of `systempaths=unconfined`
        // (BuildKit's docs/rootless.md).
        { name: 'BUILDKITD_FLAGS', value: '--oci-worker-no-process-sandbox' },
        // Shipwright's runtime directory, an emptyDir below (rootlesskit and the daemon socket).
        { name: 'XDG_RUNTIME_DIR', value: `${BUILDKIT_HOME}/.local/tmp` },
        { name: 'DOCKER_CONFIG', value: BUILDKIT_DOCKER_CONFIG },
      ],
      securityContext: BUILDKIT_SECURITY_CONTEXT,
      dockerConfigDir: BUILDKIT_DOCKER_CONFIG,
    },
    files: dockerfile.dockerfile === undefined ? {} : { Dockerfile: dockerfile.dockerfile },
    notes,
    // Secret files are mode 0400: with fsGroup their group is the builder's, and readable by it.
    podSecurityContext: { fsGroup: BUILDKIT_USER },
    noUserNamespace: BUILDKIT_NO_USER_NAMESPACE,
    scratchVolumes: [
      // The daemon's state: the image's VOLUME is nosuid,nodev on some nodes (buildkit#879).
      { name: 'buildkitd', mountPath: `${BUILDKIT_HOME}/.local/share/buildkit` },
      { name: 'buildkit-run', mountPath: `${BUILDKIT_HOME}/.local/tmp` },
    ],
    ...(secretKeys.length === 0 ? {} : { buildSecretKeys: secretKeys }),
    ...(targets.length === 0
      ? {}
      : { pushedImage: { format: 'buildkit-metadata', file: BUILDKIT_METADATA_FILE } }),
    ...(context.s3 === undefined
      ? {}
      : { ociLayout: { format: 'oci-tar', path: BUILDKIT_OCI_TARBALL } }),
  });
}

/**
 * BuildKit registry cache flags (`--export-cache type=registry,ref=…,mode=max`,
 * `--import-cache type=registry,ref=…`). `cache: true` exports to and imports from
 * `cacheReference` (tag `buildcache`); `cache_to` names the export instead and `cache_from` adds
 * imports. Each is a registry reference, or buildx's own spelling `type=registry,ref=<reference>`;
 * other cache types (local, s3, gha…) are refused, since they would write outside the registry.
 */
function cacheFlags(
  spec: BuildSpec,
  context: JobContext,
): { args: string[]; notes: string[] } | { problem: string } {
  const notes: string[] = [];
  const imports: string[] = [];
  let exportTo: string | undefined;
  let exportMode = 'max';
  if (spec.config.cache === true) {
    const reference = cacheReference(spec, 'buildcache');
    if (reference === undefined) {
      notes.push('the layer cache is off: no cache_repo and no registry repository to keep it in');
    } else {
      imports.push(reference);
      exportTo = reference;
    }
  }
  if (spec.config.cache_to !== undefined) {
    const cache = registryCache(spec.config.cache_to);
    if (cache === undefined) return { problem: cacheProblem('cache_to', spec.config.cache_to) };
    exportTo = cache.reference;
    exportMode = cache.mode ?? exportMode;
  }
  for (const entry of spec.config.cache_from ?? []) {
    const cache = registryCache(entry);
    if (cache === undefined) return { problem: cacheProblem('cache_from', entry) };
    if (!imports.includes(cache.reference)) imports.push(cache.reference);
  }
  const insecure = (reference: string): string =>
    onInsecureRegistry(reference, context.settings) ? ',registry.insecure=true' : '';
  const args = imports.map(
    (reference) => `--import-cache=type=registry,ref=${reference}${insecure(reference)}`,
  );
  if (exportTo !== undefined) {
    args.push(
      `--export-cache=type=registry,ref=${exportTo},mode=${exportMode}${insecure(exportTo)}`,
    );
  }
  return { args, notes };
}

/**
 * `<reference>`, or BuildKit's registry cache spelling
 * `type=registry,ref=<reference>[,mode=min|max]` → the reference and the mode given; anything else
 * undefined. Other cache types (local, s3, gha…) and other attributes are refused: they would reach
 * outside the build.
 */
function registryCache(entry: string): { reference: string; mode?: string } | undefined {
  const text = entry.trim();
  if (!text.includes('=')) return CACHE_REFERENCE.test(text) ? { reference: text } : undefined;
  const attributes = new Map<string, string>();
  for (const part of text.split(',')) {
    const at = part.indexOf('=');
    if (at <= 0 || attributes.has(part.slice(0, at))) return undefined;
    attributes.set(part.slice(0, at), part.slice(at + 1));
  }
  const reference = attributes.get('ref');
  const mode = attributes.get('mode');
  const known = [...attributes.keys()].every((key) => ['type', 'ref', 'mode'].includes(key));
  if (!known || attributes.get('type') !== 'registry' || reference === undefined) return undefined;
  if (!CACHE_REFERENCE.test(reference)) return undefined;
  if (mode !== undefined && mode !== 'min' && mode !== 'max') return undefined;
  return { reference, ...(mode === undefined ? {} : { mode }) };
}

function cacheProblem(field: string, entry: string): string {
  return `${field} "${entry.slice(0, 200)}" is not a registry cache: give an image reference or type=registry,ref=<reference>[,mode=min|max]`;
}
