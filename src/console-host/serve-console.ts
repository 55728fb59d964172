import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NextFunction, Request, Response } from 'express';
import { existsSync, readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorResponseOf } from '../common/error-body.js';
import { NotFoundError } from '../common/errors.js';
import { currentRequestContext } from '../common/request-context.js';

/**
 * Where `make build` puts the console (vite, after nest build): dist/console/ beside dist/. The
 * same path from src/ (tests) and from dist/ (the app), both one level under the project root.
 */
export const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/**
 * The console's Content-Security-Policy: its own scripts, styles and API only. No inline script
 * or style (Vite emits none), no eval, no framing, no plugins, no base or form target elsewhere.
 * `connect-src 'self'` covers the log WebSocket on the same host (ws: and wss: of the page's
 * origin, CSP Level 3).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** Paths the console never answers: the API, its documents and the probes. */
const NOT_CONSOLE = /^\/(?:api(?:\/|$)|healthz$|readyz$)/;

function secure(response: ServerResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.setHeader(name, value);
}

/**
 * Serves the web console at `/` from dist/console/: hashed assets cached for a year (their names
 * change with their content), index.html never cached, and index.html for any other page a
 * browser navigates to (`/builds/…`), so links and reloads work. Only GET and HEAD, only outside
 * /api, /healthz and /readyz. Without a built console (a checkout before `make build`), `/` says
 * how to build it.
 */
export function serveConsole(app: NestExpressApplication, dir = CONSOLE_DIR): void {
  const indexPath = join(dir, 'index.html');
  const built = existsSync(indexPath);
  const index = built ? readFileSync(indexPath) : undefined;

  app.useStaticAssets(dir, {
    index: false,
    redirect: false,
    fallthrough: true,
    setHeaders(response: ServerResponse, path: string) {
      secure(response);
      response.setHeader(
        'Cache-Control',
        path.includes(`${join(dir, 'assets')}`)
          ? 'public, max-age=31536000, immutable'
          : 'no-cache',
      );
    },
  });
  app.use((request: Request, response: Response, next: NextFunction) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return next();
    if (request.path.startsWith('/assets/')) {
      // A missing asset is a 404, not the page, under the console's headers; its body does not
      // echo the path asked for (text a link can choose, on the console's origin).
      secure(response);
      response.setHeader('Cache-Control', 'no-cache');
      const traceId = currentRequestContext()?.requestId ?? null;
      const { status, body } = errorResponseOf(new NotFoundError('No such console asset'), traceId);
      response.status(status).json(body);
      return;
    }
    if (NOT_CONSOLE.test(request.path) || !request.accepts('html')) return next();
    secure(response);
    response.setHeader('Cache-Control', 'no-cache');
    if (index === undefined) {
      response
        .status(503)
        .type('text/plain')
        .send('The kiln console is not built: run `make build`. The API is at /api/v1.\n');
      return;
    }
    response.status(200).type('html').send(index);
  });
}
