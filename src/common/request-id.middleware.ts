import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { requestIdFrom, runWithRequestContext } from './request-context.js';

export const REQUEST_ID_HEADER = 'X-Request-Id';

/**
 * Gives every request an id (the client's X-Request-Id when it sent a plain one), echoes it on the
 * response, makes it the trace id of every log line and error body, and logs one line per request.
 */
export function requestContextMiddleware(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = requestIdFrom(req.headers['x-request-id']);
    res.setHeader(REQUEST_ID_HEADER, requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      const fields = {
        request_id: requestId,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        duration_ms: Math.round(durationMs * 10) / 10,
      };
      if (res.statusCode >= 500) logger.warn(fields, 'request completed');
      else logger.debug(fields, 'request completed');
    });
    runWithRequestContext({ requestId }, next);
  };
}
