import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import pg from 'pg';

type Query = (this: pg.Client, ...args: unknown[]) => unknown;

/**
 * The operation of a statement, its first keyword (`SELECT`, `INSERT`, `WITH`, …): what a span
 * may say about a query. Never its text past that, nor its parameters.
 */
export function operationOf(text: string): string {
  const keyword = /^(?:\s|--[^\n]*\n|\/\*[\s\S]*?\*\/)*([A-Za-z]{1,20})\b/.exec(text)?.[1];
  return keyword === undefined ? 'QUERY' : keyword.toUpperCase();
}

// Always called as plainQuery.apply(client, args).
// eslint-disable-next-line @typescript-eslint/unbound-method
const plainQuery = pg.Client.prototype.query as unknown as Query;

/**
 * pg's Client with one CLIENT span per query, the child of the span active when the query was
 * sent (a request's or a reconcile's). A query sent outside any recording span (the background
 * loops) records nothing, and neither do streamed queries (a Submittable). The pool uses it only
 * when tracing is on (createDataSource's `traceQueries`).
 */
export class TracedClient extends pg.Client {}

Object.defineProperty(TracedClient.prototype, 'query', {
  configurable: true,
  writable: true,
  value: function tracedQuery(this: pg.Client, ...args: unknown[]): unknown {
    const [statement] = args;
    if (trace.getActiveSpan()?.isRecording() !== true || isSubmittable(statement)) {
      return plainQuery.apply(this, args);
    }
    const text = typeof statement === 'string' ? statement : textOf(statement);
    const operation = text === undefined ? 'QUERY' : operationOf(text);
    const span = trace.getTracer('kiln').startSpan(operation, {
      kind: SpanKind.CLIENT,
      attributes: {
        'db.system.name': 'postgresql',
        'db.operation.name': operation,
        ...(this.database === undefined ? {} : { 'db.namespace': this.database }),
      },
    });
    const end = (error: unknown) => {
      if (error !== undefined && error !== null) {
        // The code, not the message: Postgres quotes row values in some (a unique violation).
        const code = (error as { code?: unknown }).code;
        const type = typeof code === 'string' ? code : 'error';
        span.setAttribute('error.type', type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: type });
      }
      span.end();
    };
    const callback = args.at(-1);
    if (typeof callback === 'function') {
      args[args.length - 1] = function (this: unknown, error: unknown, ...rest: unknown[]) {
        end(error);
        return (callback as (...a: unknown[]) => unknown).call(this, error, ...rest);
      };
      return plainQuery.apply(this, args);
    }
    let result: unknown;
    try {
      result = plainQuery.apply(this, args);
    } catch (error) {
      end(error);
      throw error;
    }
    (result as Promise<unknown>).then(
      () => end(undefined),
      (error: unknown) => end(error),
    );
    return result;
  },
});

function isSubmittable(statement: unknown): boolean {
  return (
    typeof statement === 'object' &&
    statement !== null &&
    typeof (statement as { submit?: unknown }).submit === 'function'
  );
}

function textOf(statement: unknown): string | undefined {
  const text: unknown =
    typeof statement === 'object' && statement !== null
      ? (statement as { text?: unknown }).text
      : undefined;
  return typeof text === 'string' ? text : undefined;
}
