import type { V1Container, V1EnvVar, V1SecurityContext } from '@kubernetes/client-node';

import type { BuildSource } from '../manifest/build-spec.js';
import { STEP_SECURITY_CONTEXT } from './steps.js';

/**
 * The `source` init container of a build's pod: it clones the project's repository into the
 * workspace the builder then reads (job.ts `jobOf` adds it when the project has a repository).
 */

/** The workspace emptyDir; the repository is cloned into SOURCE_DIR. */
export const WORKSPACE_DIR = '/workspace';
export const SOURCE_DIR = '/workspace/source';
export const SOURCE_CONTAINER = 'source';
/** The build Secret's keys of the project's git credentials. */
export const GIT_CREDENTIAL_KEYS = { username: 'git.username', password: 'git.password' } as const;
/** The volumes the source container mounts: the workspace and its own /tmp. */
export const SOURCE_VOLUMES = { workspace: 'workspace', tmp: 'source-tmp' } as const;

/** A credential helper that answers `get` from KILN_GIT_USERNAME and KILN_GIT_PASSWORD. */
export const GIT_CREDENTIAL_HELPER =
  '!f() { test "$1" = get || exit 0; echo "username=$KILN_GIT_USERNAME"; echo "password=$KILN_GIT_PASSWORD"; }; f';

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

/**
 * The `source` init container's script: a constant. The repository URL, branch and commit reach
 * it as positional parameters ($1 $2 $3, after $0), never as text of the script, so nothing a
 * user sends is parsed by the shell. An empty branch means the default branch; an empty commit,
 * the branch's head. `--` ends git's options before the URL; a branch or commit starting with `-`
 * (which the API refuses anyway) is refused here too, so neither can become an option. The
 * clone fetches tags: a trigger's tag build clones at the tag (`--branch v1.2.0`), which git finds
 * only among the tags it fetched.
 */
export const SOURCE_SCRIPT = [
  'set -eu',
  'for ref in "$2" "$3"; do',
  '  case "$ref" in -*) printf "kiln: refusing a git ref that starts with -: %s\\n" "$ref" >&2; exit 2 ;; esac',
  'done',
  'if [ -n "$2" ]; then',
  `  git clone --branch "$2" -- "$1" ${SOURCE_DIR}`,
  'else',
  `  git clone -- "$1" ${SOURCE_DIR}`,
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
 * (PSS "restricted"; Shipwright's git step runs the same way). 65532 is the conventional
 * `nonroot` uid of distroless and Chainguard images.
 */
export const SOURCE_SECURITY_CONTEXT: V1SecurityContext = STEP_SECURITY_CONTEXT;

/** The image, pull policy and resources the source container runs with (the Job's settings). */
export interface SourceContainerSettings {
  readonly image: string;
  readonly imagePullPolicy: V1Container['imagePullPolicy'];
  readonly resources: V1Container['resources'];
}

/**
 * The `source` container. `user` overrides the uid and gid it clones as (so a non-root builder
 * owns the checkout); `credentialsSecret` is the build's Secret holding GIT_CREDENTIAL_KEYS.
 */
export function sourceContainer(
  source: BuildSource,
  repository: string,
  settings: SourceContainerSettings,
  user: { readonly runAsUser: number; readonly runAsGroup: number } | undefined,
  credentialsSecret: string | undefined,
): V1Container {
  return {
    name: SOURCE_CONTAINER,
    image: settings.image,
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
    resources: settings.resources,
    securityContext: { ...SOURCE_SECURITY_CONTEXT, ...user },
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [
      { name: SOURCE_VOLUMES.workspace, mountPath: WORKSPACE_DIR },
      { name: SOURCE_VOLUMES.tmp, mountPath: '/tmp' },
    ],
  };
}
