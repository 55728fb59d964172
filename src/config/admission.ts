import type { EnvReader } from './reader.js';
import type { RunnerKind } from './runner.js';

/**
 * Admission (docs/adr/0042-admission-in-postgres.md): how many started builds run at once, how
 * long and how many may wait.
 */
export interface AdmissionSettings {
  /**
   * Builds running at once in the whole installation (KILN_MAX_RUNNING). Default: the local
   * runner's KILN_LOCAL_MAX_PARALLEL with the local runner, no limit with Kubernetes (the
   * cluster's own quotas bound it).
   */
  readonly maxRunning: number | undefined;
  /** Builds running at once per tenant, unless the tenant's settings say otherwise; undefined: none. */
  readonly tenantMaxRunning: number | undefined;
  /** Builds running at once per project; undefined: none. */
  readonly projectMaxRunning: number | undefined;
  /** A build that waits this long fails with QueueTimeout (KILN_QUEUE_TTL_SECONDS, default 24 h). */
  readonly queueTtlMs: number;
  /** Waiting builds per tenant; a start past it answers 429 (KILN_TENANT_MAX_QUEUED; undefined: none). */
  readonly tenantMaxQueued: number | undefined;
  /**
   * How often each process looks at the queue without being told (KILN_ADMISSION_POLL_MS): a slot
   * another process freed, a build past its time to live. Every release looks at once.
   */
  readonly pollMs: number;
}

const MAX_LIMIT = 100_000;

/** An integer from `min` to `max`, or undefined when unset. */
function optional(read: EnvReader, name: string, min: number, max: number): number | undefined {
  return read.value(name) === undefined ? undefined : read.integer(name, 0, min, max);
}

export function readAdmission(
  read: EnvReader,
  runner: RunnerKind,
  localMaxParallel: number,
): { admission: AdmissionSettings } {
  const maxRunning = optional(read, 'KILN_MAX_RUNNING', 0, MAX_LIMIT);
  return {
    admission: {
      maxRunning: maxRunning ?? (runner === 'local' ? localMaxParallel : undefined),
      tenantMaxRunning: optional(read, 'KILN_TENANT_MAX_RUNNING', 0, MAX_LIMIT),
      projectMaxRunning: optional(read, 'KILN_PROJECT_MAX_RUNNING', 0, MAX_LIMIT),
      queueTtlMs: read.integer('KILN_QUEUE_TTL_SECONDS', 24 * 3600, 1, 30 * 24 * 3600) * 1000,
      tenantMaxQueued: optional(read, 'KILN_TENANT_MAX_QUEUED', 0, 10_000_000),
      pollMs: read.integer('KILN_ADMISSION_POLL_MS', 1000, 10, 60_000),
    },
  };
}
