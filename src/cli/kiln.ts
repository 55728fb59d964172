#!/usr/bin/env node
import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { createLogger } from '../common/logger.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { openDatabase } from '../database/database.js';

const USAGE = `Usage: kiln <command> [options]

Commands:
  migrate        Apply pending database migrations and exit.

Options:
  --json         Print machine-readable JSON.
  -h, --help     Show this help.

kiln uses the same database as a running kiln: DATABASE_URL, or the embedded PostgreSQL under
KILN_DATA_DIR (adopted when kiln is running, started and stopped again when it is not).`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } },
  });
  const [command] = positionals;
  if (values.help === true || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined && values.help !== true ? 2 : 0;
  }
  const config = loadConfig();
  // Output is for people (or --json); kiln's own log lines go to stderr, warnings and worse only.
  const logger = createLogger(
    config.logLevel === 'info' ? 'warn' : config.logLevel,
    process.stderr,
  );

  switch (command) {
    case 'migrate': {
      const database = await openDatabase(config, logger);
      await database.close();
      const { applied } = database;
      if (values.json === true) {
        process.stdout.write(`${JSON.stringify({ applied })}\n`);
      } else if (applied.length === 0) {
        process.stdout.write('database is up to date\n');
      } else {
        process.stdout.write(
          `applied ${applied.length} migration(s):\n  ${applied.join('\n  ')}\n`,
        );
      }
      return 0;
    }
    default:
      process.stderr.write(`kiln: unknown command "${command}"\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`kiln: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
