import {
  failedControls,
  type FailedControl,
  type PodMetadata,
  type PodSpec,
} from './pod-security.js';
import { isObject, type JsonObject } from './types.js';

/**
 * Pod Security admission as kube-apiserver runs it for the double: the namespace's
 * `pod-security.kubernetes.io/*` labels pick the levels, test/support/pod-security.ts judges the
 * pod, and this file words the verdict as k8s.io/pod-security-admission does, so a refusal reads
 * `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "build"
 * must set securityContext.allowPrivilegeEscalation=false), …` and a warning `would violate …`.
 *
 * Every version label is judged by the latest checks (the checker knows no older policy), but
 * the message names the version the label asked for, as the real one does.
 */

export type Level = 'privileged' | 'baseline' | 'restricted';

export interface LevelVersion {
  level: Level;
  /** `latest` or `v1.<minor>`. */
  version: string;
}

const PREFIX = 'pod-security.kubernetes.io/';
const LEVELS: readonly Level[] = ['privileged', 'baseline', 'restricted'];
const RANK: Record<Level, number> = { privileged: 0, baseline: 1, restricted: 2 };

/**
 * The enforce and warn policies of a namespace, as api.PolicyToEvaluate reads its labels: an
 * invalid level is taken as `restricted` for enforce (fail closed) and `privileged` for warn, an
 * invalid version as `latest`; without a warn label, warn is at least what enforce is.
 */
export function podSecurityPolicy(labels: Record<string, string> | undefined): {
  enforce: LevelVersion;
  warn: LevelVersion;
} {
  const l = labels ?? {};
  const level = (key: string, invalid: Level): Level | undefined => {
    const value = l[`${PREFIX}${key}`];
    if (value === undefined) return undefined;
    return (LEVELS as readonly string[]).includes(value) ? (value as Level) : invalid;
  };
  const version = (key: string): string | undefined => {
    const value = l[`${PREFIX}${key}-version`];
    if (value === undefined) return undefined;
    return value === 'latest' || /^v1\.(0|[1-9][0-9]*)$/.test(value) ? value : 'latest';
  };
  const enforce: LevelVersion = {
    level: level('enforce', 'restricted') ?? 'privileged',
    version: version('enforce') ?? 'latest',
  };
  const warnLevel = level('warn', 'privileged');
  const warn: LevelVersion = {
    level: warnLevel ?? 'privileged',
    version: version('warn') ?? 'latest',
  };
  const validEnforceLabel = (LEVELS as readonly string[]).includes(l[`${PREFIX}enforce`] ?? '');
  if (warnLevel === undefined && validEnforceLabel && RANK[enforce.level] > RANK[warn.level]) {
    warn.level = enforce.level;
    if (version('warn') === undefined) warn.version = enforce.version;
  }
  return { enforce, warn };
}

/** `restricted:latest`, as the messages name a policy. */
export const policyName = (policy: LevelVersion): string => `${policy.level}:${policy.version}`;

/**
 * What a pod breaks of a policy, worded as the admission controller's aggregated ForbiddenDetail
 * (`<reason> (<detail>), <reason> (<detail>)`), or undefined when the policy admits it.
 */
export function podSecurityDetail(
  policy: LevelVersion,
  spec: JsonObject,
  metadata: PodMetadata,
): string | undefined {
  if (policy.level === 'privileged') return undefined;
  const controls = failedControls(policy.level, spec as unknown as PodSpec, metadata);
  if (controls.length === 0) return undefined;
  return controls
    .map((control) => {
      const { reason, detail } = worded(control, spec);
      return detail === '' ? reason : `${reason} (${detail})`;
    })
    .join(', ');
}

// ---- wording -----------------------------------------------------------------------------------

/** A checker finding: `pod: what`, `container <name>: what`, `volume <name>: what`, `annotation <key>: what`. */
interface Finding {
  where: 'pod' | 'container' | 'volume' | 'annotation';
  name: string;
  what: string;
}

function parse(finding: string): Finding {
  const colon = finding.indexOf(': ');
  const head = finding.slice(0, colon);
  const what = finding.slice(colon + 2);
  if (head === 'pod') return { where: 'pod', name: '', what };
  const space = head.indexOf(' ');
  return {
    where: head.slice(0, space) as Finding['where'],
    name: head.slice(space + 1),
    what,
  };
}

const joinQuote = (items: readonly string[]): string =>
  items.length === 0 ? '' : `"${items.join('", "')}"`;
const plural = (one: string, many: string, count: number): string => (count === 1 ? one : many);
const unique = (items: readonly string[]): string[] => [...new Set(items)];
const sortedUnique = (items: readonly string[]): string[] => unique(items).sort();
const containers = (names: readonly string[]): string =>
  `${plural('container', 'containers', names.length)} ${joinQuote(names)}`;

/** `pod and containers "a", "b"` and the like: who set a forbidden value. */
function setters(pod: boolean, names: readonly string[], suffix: string): string {
  const who = [...(pod ? ['pod'] : []), ...(names.length > 0 ? [containers(names)] : [])];
  return `${who.join(' and ')}${suffix}`;
}

/** The value of a probe or lifecycle host, read back from the pod spec the checker named. */
function hostAt(spec: JsonObject, container: string, path: string): string {
  const all = ['initContainers', 'containers', 'ephemeralContainers'].flatMap((key) =>
    Array.isArray(spec[key]) ? spec[key] : [],
  );
  let current: unknown = all.find((c) => isObject(c) && c.name === container);
  for (const part of path.split('.'))
    current = isObject(current ?? null) ? (current as JsonObject)[part] : undefined;
  return typeof current === 'string' ? current : '';
}

function worded(control: FailedControl, spec: JsonObject): { reason: string; detail: string } {
  const findings = control.violations.map(parse);
  const on = (where: Finding['where']): Finding[] => findings.filter((f) => f.where === where);
  const pod = (test: (what: string) => boolean = () => true): boolean =>
    on('pod').some((f) => test(f.what));
  const named = (
    test: (what: string) => boolean = () => true,
    where: Finding['where'] = 'container',
  ): string[] =>
    unique(
      on(where)
        .filter((f) => test(f.what))
        .map((f) => f.name),
    );
  const after = (prefix: string): string[] =>
    findings.filter((f) => f.what.startsWith(prefix)).map((f) => f.what.slice(prefix.length));
  switch (control.id) {
    case 'windowsHostProcess':
      return {
        reason: 'hostProcess',
        detail: setters(
          pod(),
          named(),
          ' must not set securityContext.windowsOptions.hostProcess=true',
        ),
      };
    case 'hostNamespaces':
      return {
        reason: 'host namespaces',
        detail: on('pod')
          .map((f) => `${f.what}=true`)
          .join(', '),
      };
    case 'privileged':
      return {
        reason: 'privileged',
        detail: `${containers(named())} must not set securityContext.privileged=true`,
      };
    case 'capabilities_baseline':
      return {
        reason: 'non-default capabilities',
        detail: `${containers(named())} must not include ${joinQuote(sortedUnique(after('capability ')))} in securityContext.capabilities.add`,
      };
    case 'hostPathVolumes': {
      const volumes = named(undefined, 'volume');
      return {
        reason: 'hostPath volumes',
        detail: `${plural('volume', 'volumes', volumes.length)} ${joinQuote(volumes)}`,
      };
    }
    case 'hostPorts': {
      const names = named();
      const ports = sortedUnique(after('hostPort '));
      return {
        reason: 'hostPort',
        detail: `${containers(names)} ${plural('uses', 'use', names.length)} ${plural('hostPort', 'hostPorts', ports.length)} ${ports.join(', ')}`,
      };
    }
    case 'hostProbesAndHostLifecycle': {
      const names = sortedUnique(named());
      const hosts = sortedUnique(on('container').map((f) => hostAt(spec, f.name, f.what)));
      return {
        reason: 'probe or lifecycle host',
        detail: `${containers(names)} ${plural('uses', 'use', names.length)} ${plural('probe or lifecycle host', 'probe or lifecycle hosts', hosts.length)} ${joinQuote(hosts)}`,
      };
    }
    case 'appArmorProfile': {
      const annotations = on('annotation')
        .map((f) => `${f.name}=${JSON.stringify(f.what)}`)
        .sort();
      const values = [
        ...sortedUnique(
          [...on('pod'), ...on('container')].map((f) => f.what.replace(/^AppArmor /, '')),
        ),
        ...annotations,
      ];
      const who = [
        ...(pod() ? ['pod'] : []),
        ...(named().length > 0 ? [containers(named())] : []),
        ...(annotations.length > 0
          ? [plural('annotation', 'annotations', annotations.length)]
          : []),
      ];
      return {
        reason: plural('forbidden AppArmor profile', 'forbidden AppArmor profiles', values.length),
        detail: `${who.join(' and ')} must not set AppArmor profile type to ${joinQuote(values)}`,
      };
    }
    case 'seLinuxOptions': {
      const types = sortedUnique(after('SELinux type '));
      const data = [
        ...(types.length > 0
          ? [`${plural('type', 'types', types.length)} ${joinQuote(types)}`]
          : []),
        ...(after('SELinux user').length > 0 ? ['user may not be set'] : []),
        ...(after('SELinux role').length > 0 ? ['role may not be set'] : []),
      ];
      return {
        reason: 'seLinuxOptions',
        detail: setters(
          pod(),
          named(),
          ` set forbidden securityContext.seLinuxOptions: ${data.join('; ')}`,
        ),
      };
    }
    case 'procMount':
    case 'procMount_restricted':
      return {
        reason: 'procMount',
        detail: `${containers(named())} must not set securityContext.procMount to ${joinQuote(sortedUnique(after('procMount ')))}`,
      };
    case 'seccompProfile_baseline':
    case 'seccompProfile_restricted': {
      const explicit = (what: string): boolean => what.startsWith('seccomp ');
      const values = sortedUnique(after('seccomp '));
      if (pod(explicit) || named(explicit).length > 0)
        return {
          reason: 'seccompProfile',
          detail: setters(
            pod(explicit),
            named(explicit),
            ` must not set securityContext.seccompProfile.type to ${joinQuote(values)}`,
          ),
        };
      return {
        reason: 'seccompProfile',
        detail: `pod or ${containers(named())} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
      };
    }
    case 'sysctls':
      return { reason: 'forbidden sysctls', detail: after('sysctl ').join(', ') };
    case 'restrictedVolumes': {
      const volumes = named(undefined, 'volume');
      const types = sortedUnique(after('type '));
      return {
        reason: 'restricted volume types',
        detail: `${plural('volume', 'volumes', volumes.length)} ${joinQuote(volumes)} ${plural('uses', 'use', volumes.length)} ${plural('restricted volume type', 'restricted volume types', types.length)} ${joinQuote(types)}`,
      };
    }
    case 'allowPrivilegeEscalation':
      return {
        reason: 'allowPrivilegeEscalation != false',
        detail: `${containers(named())} must set securityContext.allowPrivilegeEscalation=false`,
      };
    case 'runAsNonRoot': {
      const explicit = (what: string): boolean => what === 'runAsNonRoot false';
      if (pod(explicit) || named(explicit).length > 0)
        return {
          reason: 'runAsNonRoot != true',
          detail: setters(
            pod(explicit),
            named(explicit),
            ' must not set securityContext.runAsNonRoot=false',
          ),
        };
      return {
        reason: 'runAsNonRoot != true',
        detail: `pod or ${containers(named())} must set securityContext.runAsNonRoot=true`,
      };
    }
    case 'runAsUser':
      return {
        reason: 'runAsUser=0',
        detail: setters(pod(), named(), ' must not set runAsUser=0'),
      };
    case 'capabilities_restricted': {
      const missing = named((what) => what === 'capabilities drop ALL');
      const adding = named((what) => what.startsWith('capability '));
      const details = [
        ...(missing.length > 0
          ? [`${containers(missing)} must set securityContext.capabilities.drop=["ALL"]`]
          : []),
        ...(adding.length > 0
          ? [
              `${containers(adding)} must not include ${joinQuote(sortedUnique(after('capability ')))} in securityContext.capabilities.add`,
            ]
          : []),
      ];
      return { reason: 'unrestricted capabilities', detail: details.join('; ') };
    }
    default:
      return { reason: control.id, detail: control.violations.join('; ') };
  }
}
