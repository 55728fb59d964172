import type { OciRegistryType } from './registry.js';

/**
 * Image references and the repository paths Harbor, Quay and Artifactory accept. Pure functions;
 * the sources each rule follows:
 *
 * - Reference grammar and Docker's normalisation: github.com/distribution/reference
 *   (reference.go "Grammar", regexp.go, normalize.go `splitDockerDomain`).
 * - Repository path: the OCI distribution spec (spec.md, "Pulling manifests"): `<name>` MUST match
 *   `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`; distribution caps
 *   it at 255 characters (RepositoryNameTotalLengthMax).
 * - Harbor: `<project>/<repository>`, the project must exist before a push (goharbor/harbor#2391,
 *   #20544); project names match `[a-z0-9]+(?:[._-][a-z0-9]+)*`, 1 to 255 characters
 *   (goharbor/harbor src/pkg/project/manager.go).
 * - Quay: `<namespace>/<repository>`, the namespace an organization or a user; namespaces match
 *   `[a-z0-9]+(?:[._-][a-z0-9]+)*`, 2 to 255 characters (quay/quay util/validation.py
 *   validate_username). Nested repository names (`org/team/app`) are allowed when
 *   FEATURE_EXTENDED_REPOSITORY_NAMES is on, its default (quay/quay util/names.py
 *   REPOSITORY_NAME_EXTENDED_REGEX; https://docs.redhat.com/en/documentation/red_hat_quay/3.13/html/configure_red_hat_quay/config-fields-nested-repositories).
 * - Artifactory, repository path method: `<host>/<repository-key>/<image>`
 *   (https://docs.jfrog.com/artifactory/docs/additional-docker-information, "Docker Repository
 *   URL Formats"). Docker repository keys have no uppercase letters or '_', at most 63
 *   characters, are not reserved names and do not end in "-cache"
 *   (https://jfrog.com/help/r/jfrog-artifactory-documentation/repository-naming-rules-and-limitations).
 *   The subdomain and port methods put the key in the host instead; kiln uses the path method.
 */

const MAX_PATH_LENGTH = 255;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
/** Harbor project and Quay namespace names: a single '.', '_' or '-' between alphanumerics. */
const SIMPLE_NAME = /^[a-z0-9]+(?:[._-][a-z0-9]+)*$/;
const QUAY_NAMESPACE_LENGTH = { min: 2, max: 255 };
const ARTIFACTORY_DOCKER_KEY_MAX = 63;
const ARTIFACTORY_RESERVED_KEYS = new Set([
  'jfrog-usage-logs',
  'jfrog-billing-logs',
  'jfrog-logs',
  'artifactory-build-info',
  'artifactory-pipe-info',
  'auto-trashcan',
  'jfrog-support-bundle',
  'artifactory-edge-uploads',
  'release-bundles',
]);
const ARTIFACTORY_RESERVED_PREFIXES = ['jfrog-system-reserved', 'jfrog-artifactory-system'];

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = new RegExp(
  `^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?$`,
);
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
const IMAGE_ID = /^[a-f0-9]{64}$/;

const DEFAULT_DOMAIN = 'docker.io';
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_PREFIX = 'library/';

/** An image reference split as Docker reads it: `host/path[:tag][@digest]`. */
export interface ImageReference {
  readonly host: string;
  readonly path: string;
  readonly tag?: string;
  readonly digest?: string;
}

/** The text is not an image reference Docker would accept. */
export class ImageReferenceError extends Error {
  constructor(
    readonly reference: string,
    detail: string,
  ) {
    super(`invalid image reference "${reference}": ${detail}`);
    this.name = 'ImageReferenceError';
  }
}

/**
 * Splits `reference` as Docker does (distribution/reference ParseNormalizedNamed): the first
 * '/'-separated part is the host only when it contains '.' or ':', is "localhost", or has an
 * uppercase letter; otherwise the host is docker.io, and a one-part path there gets "library/".
 * Throws ImageReferenceError when a part breaks the grammar.
 */
export function splitImageReference(reference: string): ImageReference {
  if (reference === '') throw new ImageReferenceError(reference, 'it is empty');
  if (IMAGE_ID.test(reference)) {
    throw new ImageReferenceError(reference, 'a 64-character image ID is not a reference');
  }
  const { host, remainder } = splitDomain(reference);
  const [nameAndTag, digest] = cutOnce(remainder, '@');
  const [path, tag] = cutOnce(nameAndTag, ':');

  if (!DOMAIN.test(host)) throw new ImageReferenceError(reference, `"${host}" is not a host`);
  const pathProblem = ociPathProblem(path);
  if (pathProblem !== undefined) throw new ImageReferenceError(reference, pathProblem);
  if (tag !== undefined && !TAG.test(tag)) {
    throw new ImageReferenceError(
      reference,
      `tag "${tag}" must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'`,
    );
  }
  if (digest !== undefined && !DIGEST.test(digest)) {
    throw new ImageReferenceError(reference, `"${digest}" is not a digest (algorithm:hex)`);
  }
  return {
    host,
    path,
    ...(tag === undefined ? {} : { tag }),
    ...(digest === undefined ? {} : { digest }),
  };
}

/** distribution/reference normalize.go `splitDockerDomain`. */
function splitDomain(reference: string): { host: string; remainder: string } {
  const slash = reference.indexOf('/');
  if (slash === -1) return { host: DEFAULT_DOMAIN, remainder: OFFICIAL_PREFIX + reference };
  const first = reference.slice(0, slash);
  const rest = reference.slice(slash + 1);
  let host: string;
  let remainder: string;
  if (first === LEGACY_DEFAULT_DOMAIN) {
    [host, remainder] = [DEFAULT_DOMAIN, rest];
  } else if (first === 'localhost' || /[.:]/.test(first) || first.toLowerCase() !== first) {
    [host, remainder] = [first, rest];
  } else {
    [host, remainder] = [DEFAULT_DOMAIN, reference];
  }
  if (host === DEFAULT_DOMAIN && !remainder.includes('/')) remainder = OFFICIAL_PREFIX + remainder;
  return { host, remainder };
}

function cutOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at === -1 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}

/**
 * Why `path` is not a repository path under the OCI distribution spec's grammar, or undefined
 * when it is one.
 */
export function ociPathProblem(path: string): string | undefined {
  if (path === '') return 'the repository path is empty';
  if (/[:@]/.test(path)) {
    return `"${path}" has a tag or digest in it: give the repository path only`;
  }
  if (path.toLowerCase() !== path) return `"${path}" has uppercase letters: use lowercase`;
  if (path.length > MAX_PATH_LENGTH) {
    return `"${path.slice(0, 40)}…" is longer than ${MAX_PATH_LENGTH} characters`;
  }
  for (const segment of path.split('/')) {
    if (segment === '') return `"${path}" has an empty '/'-separated part`;
    if (!PATH_COMPONENT.test(segment)) {
      return (
        `"${segment}" in "${path}" is not a valid path part: use lowercase letters and digits, ` +
        `joined by '.', '_', '__' or dashes`
      );
    }
  }
  return undefined;
}

/**
 * Why `registry` would not take `path` (a repository path: no host, tag or digest), as a sentence
 * a user can act on; undefined when the path is fine. The OCI grammar comes first, then the
 * registry's own naming rules (see the module comment).
 */
export function repositoryProblem(registry: OciRegistryType, path: string): string | undefined {
  const grammar = ociPathProblem(path);
  if (grammar !== undefined) return grammar;
  const [first = '', ...rest] = path.split('/');
  switch (registry) {
    case 'harbor':
      return harborProblem(path, first, rest.length);
    case 'quay':
      return quayProblem(path, first, rest.length);
    case 'artifactory':
      return artifactoryProblem(path, first, rest.length);
  }
}

function harborProblem(path: string, project: string, after: number): string | undefined {
  if (after === 0) return `Harbor repositories are <project>/<name>: "${path}" has no project`;
  if (!SIMPLE_NAME.test(project)) {
    return (
      `Harbor project "${project}" is not a valid project name: use lowercase letters and ` +
      `digits, joined by a single '.', '_' or '-'`
    );
  }
  return undefined;
}

function quayProblem(path: string, namespace: string, after: number): string | undefined {
  if (after === 0) {
    return `Quay repositories are <namespace>/<name>: "${path}" has no organization or user namespace`;
  }
  if (namespace.length < QUAY_NAMESPACE_LENGTH.min) {
    return `Quay namespace "${namespace}" is too short: namespaces have at least ${QUAY_NAMESPACE_LENGTH.min} characters`;
  }
  if (!SIMPLE_NAME.test(namespace)) {
    return (
      `Quay namespace "${namespace}" is not a valid organization or user name: use lowercase ` +
      `letters and digits, joined by a single '.', '_' or '-'`
    );
  }
  return undefined;
}

function artifactoryProblem(path: string, key: string, after: number): string | undefined {
  if (after === 0) {
    return `Artifactory repositories are <repository-key>/<image>: "${path}" has no image name after the repository key`;
  }
  if (key.includes('_')) {
    return `Artifactory Docker repository key "${key}" has '_', which Docker repository keys may not contain`;
  }
  if (key.length > ARTIFACTORY_DOCKER_KEY_MAX) {
    return `Artifactory Docker repository key "${key}" is longer than ${ARTIFACTORY_DOCKER_KEY_MAX} characters`;
  }
  if (key.endsWith('-cache')) {
    return `Artifactory repository key "${key}" ends in "-cache", which Artifactory reserves`;
  }
  if (
    ARTIFACTORY_RESERVED_KEYS.has(key) ||
    ARTIFACTORY_RESERVED_PREFIXES.some((prefix) => key.startsWith(prefix))
  ) {
    return `Artifactory repository key "${key}" is reserved by Artifactory`;
  }
  return undefined;
}
