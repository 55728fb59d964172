// Preloaded into a child kiln (`node --import`): at exit, writes to the file named by
// KILN_TEST_MODULES_FILE every module the process loaded, one per line: ES modules as the resolve
// hook (record-modules-hooks.mjs) saw them, CommonJS ones from require.cache. test/tracing.spec.ts
// reads it to see which OpenTelemetry packages a kiln loaded.
import { appendFileSync, writeFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const file = process.env.KILN_TEST_MODULES_FILE;
if (file === undefined) throw new Error('KILN_TEST_MODULES_FILE is not set');
writeFileSync(file, '');
register('./record-modules-hooks.mjs', import.meta.url, { data: { file } });
const require = createRequire(import.meta.url);
process.on('exit', () => appendFileSync(file, `${Object.keys(require.cache).join('\n')}\n`));
