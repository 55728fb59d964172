import { DNS_LABEL, DNS_SUBDOMAIN } from './kube.js';
import type { EnvReader } from './reader.js';
import { type OperatorSteps, readSteps } from './steps.js';

/** How the operator runs: workers, leader election (client-go's defaults), watches. */
export interface OperatorRuntimeSettings {
  /** Reconciles at once. */
  readonly workers: number;
  /** The Lease that elects one active operator. */
  readonly leaseName: string;
  /**
   * The Lease's namespace: the operator's own in a Helm install (its Role there holds only
   * Leases), else the build namespace.
   */
  readonly leaseNamespace: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** The longest a watch lives before it is restarted (a half-open watch is found by then). */
  readonly watchTimeoutMs: number;
  /** Every cached object is reconciled again this often; 0: never. */
  readonly resyncPeriodMs: number;
}

/** The Pod Security Standards levels; each build method needs one (src/build-methods/). */
type PodSecurityLevelName = 'restricted' | 'baseline' | 'privileged';

/**
 * Where the Build resources (and their Jobs, pods and Secrets) of each Pod Security level live
 * (docs/adr/0040-namespaces-by-pod-security-level.md): KILN_BUILD_NAMESPACE_<LEVEL>, else
 * KILN_BUILD_NAMESPACE. `privileged` is undefined when no namespace admits privileged pods
 * (KILN_BUILD_ALLOW_PRIVILEGED=false): builds that need them are refused.
 */
export interface BuildNamespaces {
  readonly restricted: string;
  readonly baseline: string;
  readonly privileged: string | undefined;
}

const NAMESPACE_NAME = 'a namespace name (DNS-1123 label, at most 63 characters)';
const BOOLEAN = ['true', 'false'] as const;

/** The build namespaces and what the operator does there: Jobs, the steps, leader election. */
export function readOperator(read: EnvReader) {
  const buildNamespace = read.value('KILN_BUILD_NAMESPACE') ?? 'kiln-builds';
  const operatorDrainDeadlineMs =
    read.integer('KILN_OPERATOR_DRAIN_DEADLINE_SECONDS', 120, 1, 3600) * 1000;
  const operatorImagePullTimeoutMs =
    read.integer('KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS', 300, 1, 3600) * 1000;
  const operatorUnschedulableMs =
    read.integer('KILN_OPERATOR_UNSCHEDULABLE_SECONDS', 900, 1, 24 * 3600) * 1000;
  const operatorJobTtlSeconds = read.integer(
    'KILN_OPERATOR_JOB_TTL_SECONDS',
    3600,
    0,
    7 * 24 * 3600,
  );
  const operatorSteps: OperatorSteps = readSteps(read);
  const operatorRuntime = readRuntime(read, buildNamespace);
  if (!DNS_LABEL.test(buildNamespace)) {
    read.bad('KILN_BUILD_NAMESPACE', NAMESPACE_NAME, buildNamespace);
  }
  const buildNamespaces = readBuildNamespaces(read, buildNamespace);
  const buildUserNamespaces = read.oneOf('KILN_BUILD_USER_NAMESPACES', BOOLEAN, 'false') === 'true';
  return {
    buildNamespaces,
    buildUserNamespaces,
    operatorDrainDeadlineMs,
    operatorImagePullTimeoutMs,
    operatorUnschedulableMs,
    operatorJobTtlSeconds,
    operatorSteps,
    operatorRuntime,
  };
}

/** KILN_BUILD_NAMESPACE_<LEVEL> over the default namespace, and whether privileged pods may run. */
function readBuildNamespaces(read: EnvReader, fallback: string): BuildNamespaces {
  const own = (level: PodSecurityLevelName): string | undefined => {
    const variable = `KILN_BUILD_NAMESPACE_${level.toUpperCase()}`;
    const name = read.value(variable);
    if (name !== undefined && !DNS_LABEL.test(name)) read.bad(variable, NAMESPACE_NAME, name);
    return name;
  };
  const restricted = own('restricted') ?? fallback;
  const baseline = own('baseline') ?? fallback;
  const privileged = own('privileged');
  const allowed = read.oneOf('KILN_BUILD_ALLOW_PRIVILEGED', BOOLEAN, 'true') === 'true';
  if (!allowed && privileged !== undefined) {
    read.bad(
      'KILN_BUILD_NAMESPACE_PRIVILEGED',
      'unset while KILN_BUILD_ALLOW_PRIVILEGED=false (no namespace admits privileged pods)',
      privileged,
    );
  }
  return { restricted, baseline, privileged: allowed ? (privileged ?? fallback) : undefined };
}

function readRuntime(read: EnvReader, buildNamespace: string): OperatorRuntimeSettings {
  const runtime: OperatorRuntimeSettings = {
    workers: read.integer('KILN_OPERATOR_WORKERS', 4, 1, 64),
    leaseName: read.value('KILN_OPERATOR_LEASE_NAME') ?? 'kiln-operator',
    leaseNamespace: read.value('KILN_OPERATOR_LEASE_NAMESPACE') ?? buildNamespace,
    leaseDurationMs: read.integer('KILN_OPERATOR_LEASE_DURATION_SECONDS', 15, 2, 300) * 1000,
    renewDeadlineMs: read.integer('KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS', 10, 1, 299) * 1000,
    retryPeriodMs: read.integer('KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS', 2, 1, 60) * 1000,
    watchTimeoutMs: read.integer('KILN_OPERATOR_WATCH_TIMEOUT_SECONDS', 300, 5, 3600) * 1000,
    resyncPeriodMs: read.integer('KILN_OPERATOR_RESYNC_SECONDS', 600, 0, 24 * 3600) * 1000,
  };
  if (!DNS_SUBDOMAIN.test(runtime.leaseName)) {
    read.bad('KILN_OPERATOR_LEASE_NAME', 'a Lease name (DNS-1123 subdomain)', runtime.leaseName);
  }
  // As client-go requires: a leader gives up (renew deadline) before others may take the Lease
  // (lease duration), and retries more than once within the deadline.
  if (runtime.renewDeadlineMs >= runtime.leaseDurationMs) {
    read.bad(
      'KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS',
      'less than KILN_OPERATOR_LEASE_DURATION_SECONDS',
      String(runtime.renewDeadlineMs / 1000),
    );
  }
  if (runtime.retryPeriodMs >= runtime.renewDeadlineMs) {
    read.bad(
      'KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS',
      'less than KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS',
      String(runtime.retryPeriodMs / 1000),
    );
  }
  if (!DNS_LABEL.test(runtime.leaseNamespace)) {
    read.bad('KILN_OPERATOR_LEASE_NAMESPACE', NAMESPACE_NAME, runtime.leaseNamespace);
  }
  return runtime;
}
