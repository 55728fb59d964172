// npm run kube:double -- --port 6443 [--tls]: starts the Kubernetes API server double standalone.
// The double is TypeScript under test/support/kube/, and the repo compiles only src/ (nest build),
// so this transpiles it with @swc/core (already a devDependency; no type check here, `make lint`
// runs tsc) into node_modules/.cache/kube-double/ as ESM, where imports still resolve against
// node_modules. CommonJS (.cjs) because ESLint's typed config covers only files in tsconfig.
const { mkdirSync, readdirSync, writeFileSync } = require('node:fs');
const { join, resolve } = require('node:path');
const { pathToFileURL } = require('node:url');
const { transformFileSync } = require('@swc/core');

async function run() {
  const root = resolve(__dirname, '..');
  const source = join(root, 'test/support/kube');
  const out = join(root, 'node_modules/.cache/kube-double');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'package.json'), '{"type":"module"}\n');
  for (const file of readdirSync(source)) {
    // client.ts is the tests' client-node helper; the server does not need it.
    if (!file.endsWith('.ts') || file.endsWith('.spec.ts') || file === 'client.ts') continue;
    const { code } = transformFileSync(join(source, file), {
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'es6' },
    });
    writeFileSync(join(out, file.replace(/\.ts$/, '.js')), code);
  }
  process.chdir(root);
  const { main } = await import(pathToFileURL(join(out, 'main.js')).href);
  await main(process.argv.slice(2));
}

run().catch((error) => {
  console.error(error);
  process.exit(1);
});
