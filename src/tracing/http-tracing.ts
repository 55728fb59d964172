import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { NextFunction, Request, Response } from 'express';
import { currentRequestContext } from '../common/request-context.js';
import { routeOf } from '../metrics/http-metrics.js';

/** The instrumentation scope of kiln's own spans. */
export const TRACER_NAME = 'kiln';

/** The probes a kubelet sends every few seconds: traces of them would drown the rest. */
const UNTRACED = new Set(['/healthz', '/readyz']);

/**
 * One server span per HTTP request, named `<METHOD> <route template>` once the route is known,
 * with the request id kiln logs and returns (`kiln.request_id`). A request carrying a W3C
 * `traceparent` continues that trace. The rest of the request (the database calls, every log
 * line) runs inside the span's context. Installed after the request-id middleware (and so after
 * /metrics), and only when tracing is on; the probes are not traced.
 */
export function httpTracing() {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (UNTRACED.has(req.path)) {
      next();
      return;
    }
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const requestId = currentRequestContext()?.requestId;
    const span = trace.getTracer(TRACER_NAME).startSpan(
      req.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': req.method,
          'url.path': req.path,
          ...(requestId === undefined ? {} : { 'kiln.request_id': requestId }),
        },
      },
      parent,
    );
    let ended = false;
    const end = (aborted: boolean) => {
      if (ended) return;
      ended = true;
      const route = routeOf(req);
      if (route !== 'unmatched') {
        span.setAttribute('http.route', route);
        span.updateName(`${req.method} ${route}`);
      }
      if (aborted) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: 'client closed the connection' });
      } else {
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    };
    res.once('finish', () => end(false));
    res.once('close', () => end(!res.writableFinished));
    context.with(trace.setSpan(parent, span), next);
  };
}
