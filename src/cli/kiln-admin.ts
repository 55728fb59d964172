#!/usr/bin/env node
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { parseArgs } from 'node:util';
import { KILN_ENTITIES } from '../app.entities.js';
import { AuditEventsRepository } from '../audit/audit-events.repository.js';
import { AuditLog } from '../audit/audit-log.js';
import { TenancyService } from '../auth/tenancy.service.js';
import { translateDatabaseError } from '../common/database-errors.js';
import { KilnError } from '../common/errors.js';
import { createLogger } from '../common/logger.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { openDatabase } from '../database/database.js';
import { CliModule } from './cli.module.js';
import { recordAdminAction, runCommand } from './commands.js';

const USAGE = `Usage: kiln-admin <command> [options]

kiln-admin opens kiln's database directly, without any HTTP server: it is for what must work
before the API does or when it cannot (migrations, the first administrator, emergency access).
Everything else goes through the API with the \`kiln\` command (docs/cli.md).

Commands:
  migrate                                          Apply pending database migrations.
  user create --email <e-mail> --password-stdin    Create a user; the password is read from stdin.
  user system-admin --email <e-mail> [--off]       Make a user an installation administrator
                                                   (system:admin), or take it back: with both,
                                                   the first administrator, or emergency access.

The first administrator can also come from KILN_BOOTSTRAP_ADMIN_EMAIL and _PASSWORD on kiln's
first start. Tenants, members, projects and settings are the API's: \`kiln tenant create\`,
\`kiln member add\`, \`kiln project create\`, \`kiln settings …\` (docs/cli.md).

Options:
  --json         Print JSON instead of text.
  -h, --help     Show this help.

kiln-admin uses the same database as a running kiln: DATABASE_URL, or the embedded PostgreSQL
under KILN_DATA_DIR (used while kiln runs, started and stopped again when it does not).`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
      email: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      off: { type: 'boolean' },
      // Flags of the commands that moved to the API: accepted here, so the answer can say where.
      tenant: { type: 'string' },
      role: { type: 'string' },
      name: { type: 'string' },
      repo: { type: 'string' },
      registry: { type: 'string' },
      type: { type: 'string' },
      'settings-file': { type: 'string' },
      project: { type: 'string' },
      username: { type: 'string' },
      password: { type: 'string' },
      clear: { type: 'boolean' },
      weight: { type: 'string' },
      'max-running': { type: 'string' },
    },
  });
  if (values.help === true || positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`);
    return values.help === true ? 0 : 2;
  }
  const config = loadConfig();
  // Output is for people (or --json); kiln's own log lines go to stderr, warnings and worse only.
  const logger = createLogger(
    config.logLevel === 'info' ? 'warn' : config.logLevel,
    process.stderr,
  );
  const print = (text: string, json: unknown) =>
    process.stdout.write(`${values.json === true ? JSON.stringify(json) : text}\n`);

  const database = await openDatabase(config, logger, { entities: KILN_ENTITIES });
  try {
    if (positionals[0] === 'migrate') {
      const { applied } = database;
      const audit = new AuditLog(
        new AuditEventsRepository(database.dataSource),
        logger,
        undefined,
        {
          followLoggerLevel: true,
        },
      );
      await recordAdminAction(audit, 'database.migrate', 'success', null, null);
      print(
        applied.length === 0
          ? 'database is up to date'
          : `applied ${applied.length} migration(s):\n  ${applied.join('\n  ')}`,
        { applied },
      );
      return 0;
    }
    const context = await NestFactory.createApplicationContext(
      CliModule.forRoot(config, database.dataSource, logger),
      { logger: false, abortOnError: false },
    );
    try {
      const output = await runCommand(positionals, values, {
        tenancy: context.get(TenancyService),
        audit: context.get(AuditLog),
        readStdin,
      });
      print(output.text, output.json);
      return 0;
    } finally {
      await context.close();
    }
  } finally {
    await database.close();
  }
}

function report(error: unknown): number {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    return 2;
  }
  const known = error instanceof KilnError ? error : translateDatabaseError(error);
  if (known !== undefined) {
    const details = Object.entries(known.details ?? {}).map(([k, v]) => `\n  ${k}: ${v}`);
    process.stderr.write(`kiln-admin: ${known.message}${details.join('')}\n`);
    return 1;
  }
  process.stderr.write(`kiln-admin: ${error instanceof Error ? error.message : String(error)}\n`);
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => process.exit(report(error)),
);
