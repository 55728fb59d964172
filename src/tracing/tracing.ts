import { context, propagation, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { OperationsSettings } from '../config/operations.js';

/** The SDK of a process that exports spans (docs/operations.md#tracing). */
export interface Tracing {
  /**
   * Exports the spans still buffered and stops, waiting at most `timeoutMs`: a collector that
   * does not answer never holds up the shutdown.
   */
  shutdown(timeoutMs?: number): Promise<void>;
}

export interface TracingOptions {
  readonly otlpEndpoint: string;
  readonly serviceName: string;
  /** Set on the resource (`kiln.role`), so one collector tells the API from the operator. */
  readonly role: string;
}

/** What `<endpoint>/v1/traces` is, per the OTLP exporter specification. */
export function tracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Turns tracing on when OTEL_EXPORTER_OTLP_ENDPOINT is set; resolves to undefined, having loaded
 * nothing, when it is not. kiln's own spans (src/tracing/http-tracing.ts, the operator's
 * Controller, the database's traced client) speak only to @opentelemetry/api, which stays a
 * no-op until this registers a provider: the SDK is imported here, dynamically, and nowhere else.
 */
export async function startTracing(
  settings: OperationsSettings['tracing'],
  role: string,
  logger: Logger,
): Promise<Tracing | undefined> {
  const { otlpEndpoint, serviceName } = settings;
  if (otlpEndpoint === undefined) return undefined;
  return startSdk({ otlpEndpoint, serviceName, role }, logger);
}

const DEFAULT_SHUTDOWN_MS = 5_000;
/** How long one export may take before the exporter gives up on it. */
const EXPORT_TIMEOUT_MS = 10_000;

async function startSdk(options: TracingOptions, logger: Logger): Promise<Tracing> {
  const [
    { NodeTracerProvider, BatchSpanProcessor },
    { OTLPTraceExporter },
    { resourceFromAttributes },
    { ATTR_SERVICE_NAME },
  ] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
  ]);
  const url = tracesUrl(options.otlpEndpoint);
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: EXPORT_TIMEOUT_MS });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: options.serviceName,
      'kiln.role': options.role,
    }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  // The AsyncLocalStorage context manager (a database call's span is a child of its request's)
  // and the W3C Trace Context propagator (a `traceparent` header continues the caller's trace).
  provider.register();
  logger.info({ url, service: options.serviceName }, 'tracing: exporting spans over OTLP/HTTP');
  let stopped: Promise<void> | undefined;
  return {
    shutdown(timeoutMs = DEFAULT_SHUTDOWN_MS) {
      stopped ??= bounded(provider.shutdown(), timeoutMs)
        .then(
          (finished) => {
            if (!finished) logger.warn({ url, timeoutMs }, 'tracing: spans not exported in time');
          },
          (error: unknown) =>
            logger.warn({ err: error, url }, 'tracing: export at shutdown failed'),
        )
        .finally(() => {
          // Back to the no-op API, so a later start in the same process (the tests) registers anew.
          trace.disable();
          context.disable();
          propagation.disable();
        });
      return stopped;
    },
  };
}

/** True when `work` settled within `ms`, false when the time ran out first. */
async function bounded(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
