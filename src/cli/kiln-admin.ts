#!/usr/bin/env node
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { KILN_ENTITIES } from '../app.entities.js';
import { TenancyService } from '../auth/tenancy.service.js';
import { translateDatabaseError } from '../common/database-errors.js';
import { KilnError } from '../common/errors.js';
import { createLogger } from '../common/logger.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { openDatabase } from '../database/database.js';
import { IntegrationsService } from '../integrations/integrations.service.js';
import { ProjectsService } from '../projects/projects.service.js';
import { TenantAdmissionSettings } from '../admission/tenant-settings.repository.js';
import { CliModule } from './cli.module.js';
import { runCommand } from './commands.js';

const USAGE = `Usage: kiln-admin <command> [options]

kiln-admin opens kiln's database directly, without any HTTP server: it is for what must work
before the API does or when it cannot (migrations, the first tenant and user, emergency access).
Everything else goes through the API with the \`kiln\` command (docs/cli.md).

Commands:
  migrate                                          Apply pending database migrations.
  tenant create <name>                             Create a tenant.
  tenant admission --tenant <id|name> [--weight <n>] [--max-running <n>|default]
                                                   Show or set the tenant's weight in the fair
                                                   share of build slots and its own limit on
                                                   running builds (docs/admission.md).
  user create --email <e-mail> --password-stdin    Create a user; the password is read from stdin.
  user system-admin --email <e-mail> [--off]       Make a user an installation administrator
                                                   (system:admin: every tenant, every user), or
                                                   take it back: emergency access.
  member add --tenant <id|name> --email <e-mail> --role <admin|developer|viewer>
                                                   Add a user to a tenant, or change their role.
  member remove --tenant <id|name> --email <e-mail>
                                                   Take a user out of a tenant.
  project create --tenant <id|name> --name <name> [--repo <git URL>] [--registry <host[:port][/path]>]
                                                   Create a project; --registry is where builds
                                                   that name no repository push their images.
  project list --tenant <id|name>                  List a tenant's projects.
  project git-credentials --tenant <id|name> --project <id|name>
                     (--username <user> --password <secret reference> | --clear)
                                                   Credentials builds clone the repository with.
  secret-manager set --tenant <id|name> --type <vault|aws_secretsmanager|azure_keyvault>
                     --settings-file <file.json|->
                                                   Set where a tenant's secret manager is and how
                                                   kiln authenticates to it (docs/secret-managers-and-registries.md).
  secret-manager list|remove --tenant <id|name> [--type <type>]
  registry set --tenant <id|name> --type <harbor|quay|artifactory|s3> --settings-file <file.json|->
                                                   Set a tenant's registry: its address and the
                                                   secret references of its credentials.
  registry list|remove --tenant <id|name> [--type <type>]

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
      off: { type: 'boolean' },
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
        projects: context.get(ProjectsService),
        integrations: context.get(IntegrationsService),
        admission: new TenantAdmissionSettings(database.dataSource),
        readStdin,
        readFile: (path) => readFile(path, 'utf8'),
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
