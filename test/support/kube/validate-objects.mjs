// Validates Kubernetes objects against Kubernetes' own OpenAPI schemas, through the
// `kubernetes-models` package (one generated validator per kind). Plain Node ESM in its own
// process: the package is ESM-only with `import`-only exports, which jest's CJS mode cannot load.
//
// stdin: a JSON array of objects. stdout: a JSON array, one entry per object:
// { kind, name, errors: [] } where errors are "path: message" strings; unknown kinds are an error.
import { readFileSync } from 'node:fs';

const objects = JSON.parse(readFileSync(0, 'utf8'));
const results = [];
for (const object of objects) {
  const { apiVersion = '', kind = '' } = object ?? {};
  const name = object?.metadata?.name ?? '';
  let model;
  try {
    model = (await import(`kubernetes-models/${apiVersion}`))[kind];
  } catch {
    model = undefined;
  }
  if (model === undefined) {
    results.push({ kind, name, errors: [`no schema for ${apiVersion} ${kind}`] });
    continue;
  }
  try {
    new model(object).validate();
    results.push({ kind, name, errors: [] });
  } catch (error) {
    const details = error?.errors ?? [];
    const errors = details.length
      ? details.map(
          (e) =>
            `${e.instancePath || '/'}: ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`,
        )
      : [String(error?.message ?? error)];
    results.push({ kind, name, errors });
  }
}
process.stdout.write(JSON.stringify(results));
