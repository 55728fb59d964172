#!/usr/bin/env node
// `kiln`: kiln's HTTP command line (docs/cli.md). It talks to kiln only through the public API and
// imports nothing of the server (.dependency-cruiser.cjs: cli-http-only-http).
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { main } from './program.js';

/** kiln's version, from the package.json beside dist/ (as `npm run`, npx or the image has it). */
function version(): string {
  try {
    const path = new URL('../../../package.json', import.meta.url);
    return (JSON.parse(readFileSync(path, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

// A reader that went away (`kiln logs … | head`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const { KILN_URL, KILN_TOKEN, KILN_TENANT, XDG_CONFIG_HOME, DOCKER_CONFIG } = process.env;
const code = await main(process.argv.slice(2), {
  KILN_URL,
  KILN_TOKEN,
  KILN_TENANT,
  XDG_CONFIG_HOME,
  DOCKER_CONFIG,
  HOME: homedir(),
  version: version(),
});
// Open keep-alive sockets must not hold the process: leave once what was written is flushed.
process.stdout.write('', () => process.exit(code));
