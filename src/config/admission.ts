import type { EnvReader } from './reader.js';
import type { RunnerKind } from './runner.js';

/**
 * Admission (docs/adr/0042-admission-in-postgres.md): how many started builds run at once, how
 * long and how many may wait.
 */
export const ADMISSION_MODES = ['kiln', 'kueue'] as const;
export type AdmissionMode = (typeof ADMISSION_MODES)[number];

export interface AdmissionSettings {
  /**
   * kiln (default): kiln's own admission decides, KILN_MAX_RUNNING included. kueue: Kueue admits
   * build Jobs in the cluster (they are created suspended, labelled with their LocalQueue);
   * kiln's installation limit is off, its tenant and project limits stay.
   */
  readonly mode: AdmissionMode;
  /** kueue: the LocalQueue of a tenant without its own (KILN_KUEUE_LOCAL_QUEUE, default kiln). */
  readonly kueueLocalQueue: string;
  /** kueue: LocalQueues of tenants, by tenant id (KILN_KUEUE_LOCAL_QUEUES=<id>=<queue>,…). */
  readonly kueueLocalQueues: Readonly<Record<string, string>>;
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

const QUEUE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function readAdmission(
  read: EnvReader,
  runner: RunnerKind,
  localMaxParallel: number,
): { admission: AdmissionSettings } {
  const mode = read.oneOf('KILN_ADMISSION', ADMISSION_MODES, 'kiln');
  const maxRunning = optional(read, 'KILN_MAX_RUNNING', 0, MAX_LIMIT);
  if (mode === 'kueue' && runner !== 'kubernetes') {
    read.bad(
      'KILN_ADMISSION',
      'kiln with the local runner (kueue needs KILN_RUNNER=kubernetes)',
      mode,
    );
  }
  if (mode === 'kueue' && maxRunning !== undefined) {
    read.bad(
      'KILN_MAX_RUNNING',
      'unset with KILN_ADMISSION=kueue (Kueue admits Jobs)',
      String(maxRunning),
    );
  }
  const kueueLocalQueue = read.value('KILN_KUEUE_LOCAL_QUEUE') ?? 'kiln';
  if (!QUEUE_NAME.test(kueueLocalQueue)) {
    read.bad('KILN_KUEUE_LOCAL_QUEUE', 'a LocalQueue name (DNS-1123 label)', kueueLocalQueue);
  }
  const kueueLocalQueues: Record<string, string> = {};
  for (const entry of read.list('KILN_KUEUE_LOCAL_QUEUES')) {
    const [tenant, queue] = entry.split('=').map((part) => part.trim().toLowerCase());
    if (
      tenant === undefined ||
      queue === undefined ||
      !UUID.test(tenant) ||
      !QUEUE_NAME.test(queue)
    ) {
      read.bad('KILN_KUEUE_LOCAL_QUEUES', '<tenant id>=<LocalQueue name>, comma-separated', entry);
      continue;
    }
    kueueLocalQueues[tenant] = queue;
  }
  return {
    admission: {
      mode,
      kueueLocalQueue,
      kueueLocalQueues,
      maxRunning:
        mode === 'kueue'
          ? undefined
          : (maxRunning ?? (runner === 'local' ? localMaxParallel : undefined)),
      tenantMaxRunning: optional(read, 'KILN_TENANT_MAX_RUNNING', 0, MAX_LIMIT),
      projectMaxRunning: optional(read, 'KILN_PROJECT_MAX_RUNNING', 0, MAX_LIMIT),
      queueTtlMs: read.integer('KILN_QUEUE_TTL_SECONDS', 24 * 3600, 1, 30 * 24 * 3600) * 1000,
      tenantMaxQueued: optional(read, 'KILN_TENANT_MAX_QUEUED', 0, 10_000_000),
      pollMs: read.integer('KILN_ADMISSION_POLL_MS', 1000, 10, 60_000),
    },
  };
}
