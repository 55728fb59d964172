// The OpenAPI generator, run at build time (scripts/openapi-document.cjs from `make build`) and by
// the test setup (test/support/global-setup.ts): the only code path that loads @nestjs/swagger.
// The api role serves what it writes (common/openapi-files.ts; docs/adr/0051-api-role-memory.md).
import 'reflect-metadata';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { DestinationStream } from 'pino';
import { stringify } from 'yaml';
import { KILN_ENTITIES } from './app.entities.js';
import { createApp } from './app.factory.js';
import { createLogger } from './common/logger.js';
import { buildOpenApiDocument } from './common/openapi-document.js';
import { OPENAPI_FILES } from './common/openapi-files.js';
import { loadConfig } from './config/config.js';
import { createDataSource } from './database/data-source.js';
import { logStreamPaths } from './log-stream/log-stream.openapi.js';

/** The browsable UI's assets, from the swagger-ui-dist that @nestjs/swagger depends on. */
const UI_ASSETS = [
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'swagger-ui-standalone-preset.js',
  'favicon-32x32.png',
  'favicon-16x16.png',
];

/** The UI's page, at /api/v1/docs/: scripts from files only, the document from its own route. */
const UI_PAGE = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>kiln API</title>
    <link rel="stylesheet" href="swagger-ui.css" />
    <link rel="icon" type="image/png" href="favicon-32x32.png" sizes="32x32" />
    <link rel="icon" type="image/png" href="favicon-16x16.png" sizes="16x16" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="swagger-ui-bundle.js"></script>
    <script src="swagger-ui-standalone-preset.js"></script>
    <script src="swagger-ui-init.js"></script>
  </body>
</html>
`;

const UI_INIT = `window.addEventListener('load', () => {
  window.ui = SwaggerUIBundle({
    url: '../openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'StandaloneLayout',
  });
});
`;

function swaggerUiDist(): string {
  const require = createRequire(import.meta.url);
  const swagger = require.resolve('@nestjs/swagger');
  return dirname(createRequire(swagger).resolve('swagger-ui-dist/package.json'));
}

/**
 * Writes into `dir` what the api role serves (OPENAPI_FILES): the document as JSON (what the CLI's
 * and the console's API types and `make lint-openapi` read) and YAML, and the UI. The document
 * comes from the controllers' and DTOs' metadata of the api role's application, which is created
 * (its modules instantiated) but never initialised or listening; its DataSource is never
 * initialised. The environment is fixed, not the caller's, so the document is the same everywhere;
 * the secrets are given so that nothing is generated on disk.
 */
export async function writeOpenApiFiles(
  dir: string,
  logTo: DestinationStream = process.stderr,
): Promise<void> {
  const workDir = mkdtempSync(join(tmpdir(), 'kiln-openapi-'));
  const logger = createLogger('warn', logTo);
  try {
    const config = loadConfig(
      {
        KILN_ROLE: 'api',
        KILN_RUNNER: 'local',
        KILN_JWT_SECRET: 'openapi-document-only-'.padEnd(64, 'x'),
        KILN_SECRETS_KEY: 'openapi-document-only-'.padEnd(64, 'y'),
      },
      workDir,
      workDir,
    );
    // Port 1 refuses at once: a provider that did reach for the database would fail loudly.
    const dataSource = createDataSource({
      url: 'postgres://kiln@127.0.0.1:1/never-opened',
      logger,
      entities: KILN_ENTITIES,
    });
    const app = await createApp(config, dataSource, logger, { openApiDir: workDir });
    try {
      const document = buildOpenApiDocument(app, logStreamPaths());
      mkdirSync(join(dir, OPENAPI_FILES.ui), { recursive: true });
      writeFileSync(join(dir, OPENAPI_FILES.json), JSON.stringify(document, null, 2));
      writeFileSync(
        join(dir, OPENAPI_FILES.yaml),
        stringify(document, { aliasDuplicateObjects: false }),
      );
    } finally {
      await app.close();
    }
    const ui = join(dir, OPENAPI_FILES.ui);
    const assets = swaggerUiDist();
    for (const asset of UI_ASSETS) copyFileSync(join(assets, asset), join(ui, asset));
    writeFileSync(join(ui, 'index.html'), UI_PAGE);
    writeFileSync(join(ui, 'swagger-ui-init.js'), UI_INIT);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
