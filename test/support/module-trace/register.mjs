// `node --import ./register.mjs app.js`: records every module the process loads into the file
// named by KILN_MODULE_TRACE, one file URL a line (test/role-modules.spec.ts). ES modules are
// seen by the loader's `load` hook as they load; CommonJS ones are added from require.cache when
// the process exits.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

const file = process.env.KILN_MODULE_TRACE;
if (file === undefined) throw new Error('KILN_MODULE_TRACE names the file to record into');
register('./hooks.mjs', import.meta.url, { data: { file } });

const cache = createRequire(import.meta.url).cache;
process.on('exit', () => {
  const required = Object.keys(cache).map((path) => pathToFileURL(path).href);
  appendFileSync(file, required.map((url) => `${url}\n`).join(''));
});
