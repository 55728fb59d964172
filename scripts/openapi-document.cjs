#!/usr/bin/env node
// Writes kiln's OpenAPI document (what the api role serves at /api/v1/openapi.json) from the
// compiled app in dist/, without a database or a running server. `make build` writes
// dist/openapi.json with it: the console's API types are generated from that file
// (scripts/build-console.sh), and `make lint-openapi` lints it.
//
//   node scripts/openapi-document.cjs dist/openapi.json
'use strict';

const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join, resolve } = require('node:path');
const { pathToFileURL } = require('node:url');

const ROOT = resolve(__dirname, '..');

/**
 * Writes the document the api role serves at /api/v1/openapi.json, from dist/. The application is
 * created (its modules instantiated) but never initialised or listening, and its DataSource is
 * never initialised: the document comes from the controllers' metadata alone. The environment is
 * fixed, not the caller's, so the document is the same everywhere; the secrets are given so that
 * nothing is generated on disk.
 */
async function writeDocumentFromDist(path, workDir) {
  require('reflect-metadata');
  const dist = (file) => import(pathToFileURL(join(ROOT, 'dist', file)).href);
  const [
    { createApp },
    { loadConfig },
    { createDataSource },
    { KILN_ENTITIES },
    { createLogger },
    { buildOpenApiDocument },
    { logStreamPaths },
  ] = await Promise.all([
    dist('app.factory.js'),
    dist('config/config.js'),
    dist('database/data-source.js'),
    dist('app.entities.js'),
    dist('common/logger.js'),
    dist('common/openapi-document.js'),
    dist('log-stream/log-stream.openapi.js'),
  ]);
  const logger = createLogger('warn', require('pino').destination(2));
  const config = loadConfig(
    {
      KILN_ROLE: 'api',
      KILN_JWT_SECRET: 'openapi-document-only-'.padEnd(64, 'x'),
      KILN_SECRETS_KEY: 'openapi-document-only-'.padEnd(64, 'y'),
    },
    workDir,
  );
  // Port 1 refuses at once: a provider that did reach for the database would fail loudly.
  const dataSource = createDataSource({
    url: 'postgres://kiln@127.0.0.1:1/never-opened',
    logger,
    entities: KILN_ENTITIES,
  });
  const app = await createApp(config, dataSource, logger);
  try {
    writeFileSync(path, JSON.stringify(buildOpenApiDocument(app, logStreamPaths()), null, 2));
  } finally {
    await app.close();
  }
}

module.exports = { writeDocumentFromDist };

if (require.main === module) {
  const out = process.argv[2];
  if (out === undefined) {
    process.stderr.write('usage: node scripts/openapi-document.cjs <out.json>\n');
    process.exit(2);
  }
  const workDir = mkdtempSync(join(tmpdir(), 'kiln-openapi-'));
  writeDocumentFromDist(resolve(out), workDir)
    .catch((error) => {
      process.stderr.write(
        `openapi-document: ${error instanceof Error ? error.stack : String(error)}\n`,
      );
      process.exitCode = 1;
    })
    .finally(() => rmSync(workDir, { recursive: true, force: true }));
}
