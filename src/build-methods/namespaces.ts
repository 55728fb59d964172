import type { MethodName } from '../manifest/types.js';
import type { PodSecurityLevel } from './job.js';
import { BUILD_METHODS } from './methods.js';

/**
 * Which namespace a build lives in, by the Pod Security level its method needs
 * (docs/adr/0040-namespaces-by-pod-security-level.md). Pure: the operator and the API's runner
 * both decide with it, from the configured namespaces.
 */

/** Least permissive first: a namespace admits its own level and every one before it. */
export const POD_SECURITY_LEVELS: readonly PodSecurityLevel[] = [
  'restricted',
  'baseline',
  'privileged',
];

/**
 * The build namespace of each level. One name for several levels is one namespace at the most
 * permissive of them; `privileged` undefined: no namespace admits privileged pods.
 */
export interface NamespacesByLevel {
  readonly restricted: string;
  readonly baseline: string;
  readonly privileged: string | undefined;
}

/** Every level in one namespace: how kiln ran before levels had namespaces of their own. */
export function oneNamespace(namespace: string): NamespacesByLevel {
  return { restricted: namespace, baseline: namespace, privileged: namespace };
}

/** The namespace builds of `method` are written to; undefined when none admits their pods. */
export function namespaceOfMethod(
  namespaces: NamespacesByLevel,
  method: MethodName,
): string | undefined {
  return namespaces[BUILD_METHODS[method].podSecurityLevel];
}

/** Every distinct build namespace, in level order: the namespaces the operator watches. */
export function buildNamespacesOf(namespaces: NamespacesByLevel): string[] {
  return [...new Set(POD_SECURITY_LEVELS.flatMap((level) => namespaces[level] ?? []))];
}

/**
 * The most permissive level `namespace` is configured for; undefined when it is no build
 * namespace.
 */
export function levelOfNamespace(
  namespaces: NamespacesByLevel,
  namespace: string,
): PodSecurityLevel | undefined {
  return POD_SECURITY_LEVELS.filter((level) => namespaces[level] === namespace).at(-1);
}

/**
 * Why a build of `method` may not run in `namespace`: its level does not admit the method's pods
 * (its pods would be refused at admission). Undefined when it may. A namespace admits a method of
 * its own level or a stricter one, so a build applied into a more permissive namespace runs.
 */
export function placementProblem(
  namespaces: NamespacesByLevel,
  namespace: string,
  method: MethodName,
): string | undefined {
  const needed = BUILD_METHODS[method].podSecurityLevel;
  const level = levelOfNamespace(namespaces, namespace);
  if (level !== undefined && rank(level) >= rank(needed)) return undefined;
  const home = namespaces[needed];
  const here =
    level === undefined
      ? `namespace ${namespace} is not a build namespace of this kiln`
      : `namespace ${namespace} admits Pod Security "${level}" pods at most`;
  return home === undefined
    ? `${method} builds need Pod Security "${needed}" pods, which no build namespace of this kiln admits (an administrator enables them: KILN_BUILD_ALLOW_PRIVILEGED, the chart's builds.buildx.enabled)`
    : `${method} builds need Pod Security "${needed}" pods and belong in namespace ${home}; ${here}`;
}

const rank = (level: PodSecurityLevel): number => POD_SECURITY_LEVELS.indexOf(level);
