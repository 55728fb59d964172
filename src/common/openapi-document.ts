import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';

export const OPENAPI_JSON_PATH = 'api/v1/openapi.json';
export const OPENAPI_UI_PATH = 'api/v1/docs';

/** The OpenAPI 3 document, generated from the controllers and DTOs (spec section 9: 1.0.0). */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('kiln build service')
    .setDescription(
      'Creates, starts, monitors, cancels and retries container-image builds and serves their logs. ' +
        'Every route but login needs `Authorization: Bearer <token>` and `X-Tenant-ID`. Every error has the Error body. ' +
        '`X-RateLimit-Reset` is the Unix time, in whole seconds, at which the rate-limit window resets; a 429 also carries `Retry-After` in seconds.',
    )
    .setVersion('1.0.0')
    .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
    .build();
  return SwaggerModule.createDocument(app, config);
}

/** Serves the document as JSON and a browsable UI; neither needs authentication. */
export function serveOpenApi(app: INestApplication): void {
  SwaggerModule.setup(OPENAPI_UI_PATH, app, () => buildOpenApiDocument(app), {
    jsonDocumentUrl: OPENAPI_JSON_PATH,
    yamlDocumentUrl: 'api/v1/openapi.yaml',
    customSiteTitle: 'kiln API',
  });
}
