// Build time only: the one module that loads @nestjs/swagger (src/app.openapi.ts, which `make
// build` and the test setup run). The running api role serves what it wrote
// (common/openapi-files.ts) and never imports this file (docs/adr/0051-api-role-memory.md).
import type { INestApplication } from '@nestjs/common';
import * as swagger from '@nestjs/swagger';
import type { OpenAPIObject, PathItemObject } from '@nestjs/swagger';
import { ACCESS_TOKEN_SCHEME, UPLOAD_TOKEN_SCHEME } from './openapi.js';
import { takeRecordedOpenApiDecorators } from './openapi-decorators.js';

export { OPENAPI_JSON_PATH, OPENAPI_UI_PATH } from './openapi-files.js';

/** The document's tags, each with its description: an operation uses only these. */
const TAGS: ReadonlyArray<readonly [name: string, description: string]> = [
  [
    'auth',
    "Sign-in: an e-mail and password exchanged for a bearer access token; the caller's own " +
      'account and tenants.',
  ],
  [
    'tokens',
    'API tokens for machines and CI: bearer tokens (`kiln_…`) that act in one tenant with a ' +
      "subset of their creator's permissions, until they expire or are revoked.",
  ],
  ['projects', 'The projects of the tenant in X-Tenant-ID, which builds belong to.'],
  [
    'builds',
    'Builds of container images: create, start, cancel, retry, delete, read their status, ' +
      'and the SBOM and scan results their steps stored.',
  ],
  ['logs', 'Log lines of a build: pages over HTTP and a live WebSocket stream.'],
  [
    'settings',
    'The settings of the tenant in X-Tenant-ID (its admins, settings:manage): its secret ' +
      'managers and registries, and its place in admission.',
  ],
  [
    'admin',
    "Tenants and users (installation administrators, system:admin), and a tenant's members " +
      '(its admins, member:manage).',
  ],
  [
    'audit',
    'The audit log: every state-changing call, who made it, in which tenant, on what, with what ' +
      "outcome; a tenant's for its admins (audit:read), every tenant's for installation " +
      'administrators (system:admin).',
  ],
  [
    'provenance',
    "The tenant's signing keys (public halves, and their rotation) that sign each successful " +
      "build's provenance (docs/provenance.md); the provenance itself is under builds.",
  ],
  [
    'triggers',
    "Builds from git pushes: a project's triggers (its admins, trigger:manage), their recent " +
      'deliveries, and the webhook route git hosts deliver to (docs/build-on-push.md).',
  ],
];

/**
 * Applies swagger's own decorators where kiln's recorded theirs (common/openapi-decorators.ts):
 * same arguments, same targets, same order.
 */
function applySwaggerDecorators(): void {
  for (const { name, args, target, key, descriptor } of takeRecordedOpenApiDecorators()) {
    const decorator = (swagger[name] as (...given: unknown[]) => unknown)(...args) as (
      target: object,
      key?: string | symbol,
      descriptor?: PropertyDescriptor,
    ) => unknown;
    decorator(target, key, descriptor);
  }
}

/**
 * The OpenAPI 3 document, generated from the controllers and DTOs (version 1.0.0), with
 * `extraPaths`: what a transport that is no Nest controller describes itself (the log WebSocket,
 * log-stream.openapi.ts), handed in by the composition root.
 */
export function buildOpenApiDocument(
  app: INestApplication,
  extraPaths: Readonly<Record<string, PathItemObject>> = {},
): OpenAPIObject {
  applySwaggerDecorators();
  const builder = new swagger.DocumentBuilder()
    .setTitle('kiln build service')
    .setDescription(
      'Creates, starts, monitors, cancels and retries container-image builds and serves their logs. ' +
        'Every route but login needs `Authorization: Bearer <token>` and `X-Tenant-ID`. Every error has the Error body. ' +
        '`X-RateLimit-Reset` is the Unix time, in whole seconds, at which the rate-limit window resets; a 429 also carries `Retry-After` in seconds.',
    )
    .setVersion('1.0.0')
    .setLicense('Apache-2.0', 'https://www.apache.org/licenses/LICENSE-2.0')
    // Relative: the document is served by the deployment it describes, under whatever host and
    // scheme the client reached it by; every path carries the /api/v1 prefix itself.
    .addServer('/', 'The kiln deployment serving this document')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: 'Access token from POST /api/v1/auth/login',
      },
      ACCESS_TOKEN_SCHEME,
    )
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: 'Upload token kiln minted for one build and one kind of result (SBOM or scan)',
      },
      UPLOAD_TOKEN_SCHEME,
    )
    // The default, as in the application (AuthGuard denies a route not marked @Public): an
    // operation without its own security still needs an access token.
    .addSecurityRequirements(ACCESS_TOKEN_SCHEME);
  for (const [name, description] of TAGS) builder.addTag(name, description);
  const document = swagger.SwaggerModule.createDocument(app, builder.build());
  Object.assign(document.paths, extraPaths);
  return document;
}
