import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NextFunction, Request, Response } from 'express';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorResponseOf } from './error-body.js';
import { NotFoundError } from './errors.js';
import { currentRequestContext } from './request-context.js';

export const OPENAPI_JSON_PATH = 'api/v1/openapi.json';
export const OPENAPI_YAML_PATH = 'api/v1/openapi.yaml';
export const OPENAPI_UI_PATH = 'api/v1/docs';

/**
 * What the build-time generator (src/app.openapi.ts) writes into a directory, dist/ for the app:
 * the document as JSON and as YAML, and the browsable UI's page with its assets.
 */
export const OPENAPI_FILES = {
  json: 'openapi.json',
  yaml: 'openapi.yaml',
  ui: 'openapi-ui',
} as const;

/**
 * dist/, where `make build` writes the files: the same path from src/ (tests) and from dist/ (the
 * app), both one level under the project root. Tests hand in the directory their setup wrote.
 */
export const OPENAPI_DIR = fileURLToPath(new URL('../../dist/', import.meta.url));

/**
 * Serves the OpenAPI document the generator wrote, byte for byte, as JSON and YAML, and the
 * browsable UI at /api/v1/docs/; none needs authentication. Nothing is read or held until asked
 * for: the api role never loads @nestjs/swagger (docs/adr/0051-api-role-memory.md). Without a
 * generated document (a checkout before `make build`) each route answers 404 saying how to
 * build it.
 */
export function serveOpenApi(app: NestExpressApplication, dir = OPENAPI_DIR): void {
  const documents = new Map<string, readonly [name: string, type: string]>([
    [`/${OPENAPI_JSON_PATH}`, [OPENAPI_FILES.json, 'application/json; charset=utf-8']],
    [`/${OPENAPI_YAML_PATH}`, [OPENAPI_FILES.yaml, 'text/yaml; charset=utf-8']],
  ]);
  app.use((request: Request, response: Response, next: NextFunction) => {
    const document = documents.get(request.path);
    if (document === undefined || (request.method !== 'GET' && request.method !== 'HEAD')) {
      return next();
    }
    const [name, type] = document;
    response.sendFile(
      name,
      { root: dir, headers: { 'Content-Type': type, 'Cache-Control': 'no-cache' } },
      (error?: Error) => {
        if (error !== undefined && !response.headersSent) notBuilt(response);
      },
    );
  });
  // /api/v1/docs redirects to /api/v1/docs/, whose page loads its assets relative to itself.
  app.useStaticAssets(join(dir, OPENAPI_FILES.ui), {
    prefix: `/${OPENAPI_UI_PATH}`,
    index: 'index.html',
    redirect: true,
    fallthrough: true,
  });
  app.use(`/${OPENAPI_UI_PATH}`, (request: Request, response: Response, next: NextFunction) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return next();
    if (request.path === '/' || request.path === '/index.html') return notBuilt(response);
    next();
  });
}

function notBuilt(response: Response): void {
  const { status, body } = errorResponseOf(
    new NotFoundError('The OpenAPI document was not built: `make build` writes dist/openapi.json'),
    currentRequestContext()?.requestId ?? null,
  );
  response.status(status).json(body);
}
