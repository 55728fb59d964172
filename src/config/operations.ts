import type { EnvReader } from './reader.js';

const BOOLEAN = ['true', 'false'] as const;

/**
 * Operating kiln (docs/operations.md): metrics, retention of finished builds, the audit log and
 * tracing.
 */
export function readOperations(read: EnvReader) {
  const metricsPort = read.value('KILN_METRICS_PORT');
  return {
    metrics: {
      /** Unset: /metrics is served on the main port; set: only on this one. */
      port:
        metricsPort === undefined ? undefined : read.integer('KILN_METRICS_PORT', 9090, 1, 65535),
      /** Adds a `tenant` label to the per-tenant build metrics (one series set per tenant). */
      tenantLabels: read.oneOf('KILN_METRICS_TENANT_LABELS', BOOLEAN, 'false') === 'true',
    },
    retention: {
      /** Finished builds older than this many days (since completion) are deleted; 0 keeps all. */
      days: read.integer('KILN_RETENTION_DAYS', 0, 0, 36_500),
      /** Keep at most this many finished builds per project (newest first); 0: no limit. */
      keepLast: read.integer('KILN_RETENTION_KEEP_LAST', 0, 0, 1_000_000),
      /** How often one replica applies the policy. */
      intervalMs: read.integer('KILN_RETENTION_INTERVAL_SECONDS', 3600, 10, 7 * 86_400) * 1000,
      /** Builds deleted per transaction. */
      batchBuilds: read.integer('KILN_RETENTION_BATCH_BUILDS', 100, 1, 10_000),
    },
    audit: {
      /** Audit events older than this many days are deleted; 0 keeps them all. */
      retentionDays: read.integer('KILN_AUDIT_RETENTION_DAYS', 365, 0, 36_500),
    },
    tracing: {
      /** OpenTelemetry: spans are exported (OTLP over HTTP) only when this is set. */
      otlpEndpoint: read.httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT'),
      serviceName: read.value('OTEL_SERVICE_NAME') ?? 'kiln',
    },
  };
}

export type OperationsSettings = ReturnType<typeof readOperations>;
