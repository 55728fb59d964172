/**
 * Every metric kiln exports, listed once: name, type, labels and meaning. The registry
 * (metrics.ts) creates exactly these; docs/operations.md's table, the chart's alerts and its
 * dashboard are tested against this list (test/metrics-catalog.spec.ts).
 *
 * Labels are bounded: a method, a result, a failure reason, a route template, a status class, a
 * verb. No build, user or tenant id, except the `tenant` label that metrics marked `perTenant`
 * carry when KILN_METRICS_TENANT_LABELS is on (one series set per tenant: documented).
 */

export type MetricType = 'counter' | 'gauge' | 'histogram';

/** Which roles export a metric: `core` metrics come from every role. */
export type MetricScope = 'core' | 'api' | 'operator';

export interface MetricDefinition {
  readonly type: MetricType;
  readonly help: string;
  readonly labels: readonly string[];
  readonly scope: MetricScope;
  /** Histograms only: the upper bounds of the buckets, in the metric's unit. */
  readonly buckets?: readonly number[];
  /** Adds a `tenant` label (the tenant's id) when KILN_METRICS_TENANT_LABELS is on. */
  readonly perTenant?: boolean;
}

/** Builds take seconds to hours: 1 s … 4 h. */
const BUILD_SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400];
/** Waiting for a slot: nothing to hours. */
const WAIT_SECONDS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400];
/** Requests, appends and reconciles: a millisecond to ten seconds. */
const CALL_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export const METRICS = {
  // Builds (lifecycle, admission).
  kiln_builds_started_total: {
    type: 'counter',
    help: 'Builds started (queued → in_progress), by build method.',
    labels: ['method'],
    scope: 'core',
    perTenant: true,
  },
  kiln_builds_finished_total: {
    type: 'counter',
    help:
      'Builds that reached a final state, by method, result (success, failed, cancelled), ' +
      'failure reason (none unless failed) and class (platform: kiln or the cluster is at fault; ' +
      'user: the build is; none).',
    labels: ['method', 'result', 'reason', 'class'],
    scope: 'core',
    perTenant: true,
  },
  kiln_build_duration_seconds: {
    type: 'histogram',
    help: 'Time from admission to the final state of a build, by method and result.',
    labels: ['method', 'result'],
    scope: 'core',
    buckets: BUILD_SECONDS,
    perTenant: true,
  },
  kiln_build_wait_seconds: {
    type: 'histogram',
    help: 'Time a started build waited to be admitted, by method.',
    labels: ['method'],
    scope: 'core',
    buckets: WAIT_SECONDS,
    perTenant: true,
  },
  kiln_builds_waiting: {
    type: 'gauge',
    help:
      'Started builds waiting to run, by the reason they wait: an admission limit ' +
      '(InstallationLimit, TenantLimit, ProjectLimit; Pending before admission said), or, once ' +
      'admitted, what the cluster said (ClusterQuota, Unschedulable, ImagePull, …). Read from the ' +
      'database at scrape: every replica reports the same value.',
    labels: ['reason'],
    scope: 'core',
    perTenant: true,
  },
  kiln_builds_waiting_oldest_seconds: {
    type: 'gauge',
    help: 'How long the longest-waiting started build has waited (0 with none). Read at scrape.',
    labels: [],
    scope: 'core',
  },
  kiln_builds_running: {
    type: 'gauge',
    help: 'Admitted builds that have not finished, read from the database at scrape.',
    labels: [],
    scope: 'core',
    perTenant: true,
  },

  // The log store and the log stream.
  kiln_log_lines_stored_total: {
    type: 'counter',
    help: 'Build log lines stored.',
    labels: [],
    scope: 'core',
  },
  kiln_log_bytes_stored_total: {
    type: 'counter',
    help: 'Bytes of build log lines stored (UTF-8, after masking).',
    labels: [],
    scope: 'core',
  },
  kiln_log_lines_masked_total: {
    type: 'counter',
    help: 'Stored log lines in which a secret was replaced by ***.',
    labels: [],
    scope: 'core',
  },
  kiln_log_lines_dropped_total: {
    type: 'counter',
    help:
      'Log lines not stored, by cause (limit: the build hit KILN_LOG_MAX_BYTES_PER_BUILD, one ' +
      '[kiln] line marks it; database_unavailable: lines held during a database outage, dropped ' +
      'past the bound with a [kiln] line in their place, or lost when the outage outlasted the ' +
      'build or the process; drain_deadline: a container log not read to its end, or a pod ' +
      'never seen, by the drain deadline: those lines were never read, so each gap counts as 1).',
    labels: ['cause'],
    scope: 'core',
  },
  kiln_log_append_duration_seconds: {
    type: 'histogram',
    help: 'Time to store one batch of log lines in the database.',
    labels: [],
    scope: 'core',
    buckets: CALL_SECONDS,
  },
  kiln_log_lines_purged_total: {
    type: 'counter',
    help: 'Log lines of deleted builds removed by the batched purge.',
    labels: [],
    scope: 'core',
  },
  kiln_log_streams_open: {
    type: 'gauge',
    help: 'Log WebSocket streams open on this replica.',
    labels: [],
    scope: 'api',
  },
  kiln_log_stream_sessions_closed_total: {
    type: 'counter',
    help:
      'Log WebSocket sessions closed, by reason (client: the client closed or stopped ' +
      'answering; build_finished: the build ended or was deleted; access_revoked: access taken ' +
      'away or the token expired; slow_consumer; shutdown; error; refused: the upgrade was ' +
      'answered with an error, no session opened).',
    labels: ['reason'],
    scope: 'api',
  },

  // HTTP.
  kiln_http_requests_total: {
    type: 'counter',
    help:
      'HTTP requests answered, by method, route template (unmatched for unknown paths) and ' +
      'status class (2xx, 3xx, 4xx, 5xx).',
    labels: ['method', 'route', 'status_class'],
    scope: 'api',
  },
  kiln_http_request_duration_seconds: {
    type: 'histogram',
    help: 'Time to answer an HTTP request, by method and route template.',
    labels: ['method', 'route'],
    scope: 'api',
    buckets: CALL_SECONDS,
  },

  // The operator.
  kiln_operator_reconciles_total: {
    type: 'counter',
    help:
      'Reconciles, by controller and result (success; requeue: it asked to look again after a ' +
      'wait, a 409 included; error: it failed and is retried with backoff, or not at all when ' +
      'permanent). One cut short by a lost lease or a shutdown is not counted.',
    labels: ['controller', 'result'],
    scope: 'operator',
  },
  kiln_operator_reconcile_duration_seconds: {
    type: 'histogram',
    help: 'Time one reconcile took, by controller (each one counted in reconciles_total).',
    labels: ['controller'],
    scope: 'operator',
    buckets: CALL_SECONDS,
  },
  kiln_operator_workqueue_depth: {
    type: 'gauge',
    help:
      'Keys waiting in the work queue for a worker, by controller (not keys a worker holds or ' +
      'that wait out a requeue delay).',
    labels: ['controller'],
    scope: 'operator',
  },
  kiln_operator_workqueue_latency_seconds: {
    type: 'histogram',
    help:
      'Time from when a key was added to the work queue until a worker took it, by controller ' +
      '(a key added again while it waits keeps its first time).',
    labels: ['controller'],
    scope: 'operator',
    buckets: CALL_SECONDS,
  },
  kiln_operator_watch_restarts_total: {
    type: 'counter',
    help:
      'Watches restarted, by resource (the informer): after an error, a 410 Gone (relist), a ' +
      'stream ended early (the 30 s idle timeout of a quiet collection) or one silent past its ' +
      'lifetime; not the routine end the server makes at the requested lifetime.',
    labels: ['resource'],
    scope: 'operator',
  },
  kiln_operator_leader: {
    type: 'gauge',
    help: '1 while this replica holds the operator lease, else 0 (0 in roles without the operator).',
    labels: [],
    scope: 'operator',
  },
  kiln_kube_api_requests_total: {
    type: 'counter',
    help:
      'Requests to the Kubernetes API server, by verb (get, list, watch, create, update, patch, ' +
      'delete) and HTTP status code (error when none came back). A watch or a log stream counts ' +
      'once, when it opens.',
    labels: ['verb', 'code'],
    scope: 'core',
  },

  // Retention and audit.
  kiln_retention_builds_deleted_total: {
    type: 'counter',
    help: 'Finished builds deleted by the retention policy, by rule (age, count).',
    labels: ['rule'],
    scope: 'core',
  },
  kiln_retention_runs_total: {
    type: 'counter',
    help: 'Retention passes, by result (success, error).',
    labels: ['result'],
    scope: 'core',
  },
  kiln_audit_events_total: {
    type: 'counter',
    help: 'Audit events recorded, by result (success, refused, failed).',
    labels: ['result'],
    scope: 'api',
  },

  // Triggers (docs/build-on-push.md).
  kiln_trigger_deliveries_total: {
    type: 'counter',
    help:
      'Webhook deliveries and polled changes, by provider and what came of them (built, ' +
      'filtered, duplicate, refused, failed).',
    labels: ['provider', 'outcome'],
    scope: 'api',
  },
  kiln_trigger_polls_total: {
    type: 'counter',
    help: 'Polls of trigger repositories (git ls-remote), by result (success, error).',
    labels: ['result'],
    scope: 'api',
  },
  kiln_commit_status_posts_total: {
    type: 'counter',
    help:
      'Commit statuses sent to git hosts, by provider and result (posted, retry: failed and ' +
      'tried again later, gave_up).',
    labels: ['provider', 'result'],
    scope: 'api',
  },
  kiln_provenance_total: {
    type: 'counter',
    help:
      "Successful builds' signed provenance, by outcome (attached: to every pushed image; " +
      'stored-only: nothing to attach it to; failed: not signed, stored or attached).',
    labels: ['outcome'],
    scope: 'core',
  },

  // The database.
  kiln_db_pool_connections: {
    type: 'gauge',
    help: 'Database pool connections, by state (in_use, idle, waiting: callers waiting for one).',
    labels: ['state'],
    scope: 'core',
  },
} as const satisfies Record<string, MetricDefinition>;

export type MetricName = keyof typeof METRICS;
export type CounterName = {
  [K in MetricName]: (typeof METRICS)[K]['type'] extends 'counter' ? K : never;
}[MetricName];
export type GaugeName = {
  [K in MetricName]: (typeof METRICS)[K]['type'] extends 'gauge' ? K : never;
}[MetricName];
export type HistogramName = {
  [K in MetricName]: (typeof METRICS)[K]['type'] extends 'histogram' ? K : never;
}[MetricName];

/**
 * Metrics prom-client's defaults add (process_*, nodejs_*): listed so the docs and the chart can
 * name them; the catalog test checks these appear in a scrape too.
 */
export const DEFAULT_PROCESS_METRICS = [
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'process_start_time_seconds',
  'process_open_fds',
  'nodejs_eventloop_lag_seconds',
  'nodejs_heap_size_used_bytes',
] as const;
