import type { NextFunction, Request, Response } from 'express';
import type { Metrics } from './metrics.js';

/**
 * Counts and times every HTTP request by method, route template and status class. The template
 * is the route Express matched (`/api/v1/builds/:id`), never the path, so ids never become label
 * values; a request no route matched counts as `unmatched`. WebSocket upgrades are not requests
 * here: kiln_log_streams_open counts them.
 */
export function httpMetrics(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const route = routeOf(req);
      const method = METHODS.has(req.method) ? req.method : 'OTHER';
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.inc('kiln_http_requests_total', {
        method,
        route,
        status_class: `${Math.floor(res.statusCode / 100)}xx`,
      });
      metrics.observe('kiln_http_request_duration_seconds', { method, route }, seconds);
    });
    next();
  };
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function routeOf(req: Request): string {
  const route: unknown = (req as { route?: unknown }).route;
  const path: unknown =
    typeof route === 'object' && route !== null ? (route as { path?: unknown }).path : undefined;
  if (typeof path === 'string') return `${req.baseUrl}${path}`;
  return 'unmatched';
}

/** GET /metrics on the main port (when KILN_METRICS_PORT is unset): no authentication. */
export function metricsHandler(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      next();
      return;
    }
    metrics.render().then(
      ({ contentType, body }) => {
        res.status(200).type(contentType).send(body);
      },
      () => {
        res.status(500).type('text/plain').send('metrics failed\n');
      },
    );
  };
}
