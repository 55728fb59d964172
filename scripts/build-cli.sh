#!/usr/bin/env bash
# Builds `kiln`, the HTTP command line (src/cli/http/), into dist/cli/http/ (run by `make build`,
# after `nest build` and scripts/build-console.sh):
#  1. kiln's OpenAPI document from the compiled app, unless build-console.sh wrote it already:
#     dist/openapi.json (nest build empties dist/, so one found there is this build's);
#  2. the CLI's API types from it (openapi-typescript): src/cli/http/api/schema.gen.ts, not
#     committed, so the CLI can never drift from the API it talks to;
#  3. its type check and compile with its own tsconfig (module nodenext, strict).
set -euo pipefail
cd "$(dirname "$0")/.."

[ -f dist/openapi.json ] || node scripts/openapi-document.cjs dist
# --default-non-nullable=false: a request property with a default (POST /projects/{id}/triggers)
# stays optional, as the API takes it; else the generated type demands every default be sent.
npx --no-install openapi-typescript dist/openapi.json --default-non-nullable=false \
  --output src/cli/http/api/schema.gen.ts --silent
npx --no-install tsc -p src/cli/http/tsconfig.json
chmod +x dist/cli/http/kiln.js dist/cli/kiln-admin.js
