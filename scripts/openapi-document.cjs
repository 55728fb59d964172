#!/usr/bin/env node
// Writes kiln's OpenAPI document (what the api role serves at /api/v1/openapi.json) and its UI
// from the compiled app in dist/, without a database or a running server: `make build` runs it
// into dist/ (scripts/build-console.sh). The api role serves these files and never loads
// @nestjs/swagger (docs/adr/0051-api-role-memory.md); the console's and the CLI's API types are
// generated from dist/openapi.json, and `make lint-openapi` lints it.
//
//   node scripts/openapi-document.cjs dist      dist/openapi.json, openapi.yaml, openapi-ui/
'use strict';

const { join, resolve } = require('node:path');
const { pathToFileURL } = require('node:url');

const ROOT = resolve(__dirname, '..');

/** Writes the files into `dir` (src/app.openapi.ts, compiled); resolves with the JSON's path. */
async function writeDocumentFromDist(dir) {
  const { writeOpenApiFiles } = await import(
    pathToFileURL(join(ROOT, 'dist', 'app.openapi.js')).href
  );
  await writeOpenApiFiles(dir);
  return join(dir, 'openapi.json');
}

module.exports = { writeDocumentFromDist };

if (require.main === module) {
  const out = process.argv[2];
  if (out === undefined) {
    process.stderr.write('usage: node scripts/openapi-document.cjs <directory>\n');
    process.exit(2);
  }
  writeDocumentFromDist(resolve(out)).catch((error) => {
    process.stderr.write(
      `openapi-document: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 1;
  });
}
