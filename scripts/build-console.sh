#!/usr/bin/env bash
# Builds the web console into dist/console/ (run by `make build`, after `nest build`):
#  1. kiln's OpenAPI document from the compiled app (no database): dist/openapi.json, with
#     openapi.yaml and the UI in openapi-ui/, which the api role serves as files;
#  2. the console's API types from it (openapi-typescript): src/console/src/api/schema.gen.ts,
#     not committed, so the console can never drift from the API it talks to;
#  3. the console's type check (its own tsconfig, TypeScript strict);
#  4. Vite's production build.
set -euo pipefail
cd "$(dirname "$0")/.."

node scripts/openapi-document.cjs dist
# --default-non-nullable=false: a request property with a default (POST /projects/{id}/triggers)
# stays optional, as the API takes it; else the generated type demands every default be sent.
npx --no-install openapi-typescript dist/openapi.json --default-non-nullable=false \
  --output src/console/src/api/schema.gen.ts --silent
npx --no-install tsc -p src/console/tsconfig.json
npx --no-install vite build --config src/console/vite.config.ts --logLevel warn
