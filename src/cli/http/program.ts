import { Command, CommanderError } from 'commander';
import { ApiError } from './api/client.js';
import { registerAudit } from './commands/audit.js';
import { registerAuth } from './commands/auth.js';
import { registerBuilds } from './commands/builds.js';
import { registerLogs } from './commands/logs.js';
import { registerMembers } from './commands/members.js';
import { registerProjects } from './commands/projects.js';
import { registerRetention } from './commands/retention.js';
import { registerSettings } from './commands/settings.js';
import { registerTenants } from './commands/tenants.js';
import { registerTokens } from './commands/tokens.js';
import { registerTriggers } from './commands/triggers.js';
import { registerUsers } from './commands/users.js';
import { registerVerify } from './commands/verify.js';
import { configPath } from './config-file.js';
import { EXIT, ExitWith, UsageError } from './exit-codes.js';
import { type CliEnvironment, Session } from './session.js';

/** What the CLI reads of its environment: the entry point passes process.env. */
export interface Environment extends CliEnvironment {
  readonly XDG_CONFIG_HOME?: string | undefined;
  readonly HOME: string;
  /** Where docker's config.json is, for `kiln verify`'s registry credentials. */
  readonly DOCKER_CONFIG?: string | undefined;
  /** What `kiln --version` prints. */
  readonly version: string;
}

/** The `kiln` command line, every command registered, bound to `session`. */
export function buildProgram(session: Session, env: Environment): Command {
  const program = new Command('kiln')
    .description(
      "kiln's command line: builds, their logs, projects, tenants, members, tokens, settings, " +
        "build triggers and the audit log, over kiln's HTTP API, and verifies the provenance of " +
        'images. Log in first: kiln login <url>. ' +
        'Docs: docs/cli.md.',
    )
    .version(env.version, '-V, --version', "the CLI's version")
    .option('--tenant <id|name>', 'the tenant to act in (else KILN_TENANT, else `kiln tenant use`)')
    .exitOverride()
    .showHelpAfterError(true)
    .showSuggestionAfterError(true)
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false });
  program.hook('preAction', async (_program, action) => {
    session.tenantFlag = action.optsWithGlobals<{ tenant?: string }>().tenant;
    await session.load();
  });
  registerAuth(program, session, env);
  registerTenants(program, session);
  registerUsers(program, session);
  registerMembers(program, session);
  registerProjects(program, session);
  registerBuilds(program, session);
  registerLogs(program, session);
  registerTokens(program, session);
  registerSettings(program, session);
  registerRetention(program, session);
  registerTriggers(program, session);
  registerAudit(program, session);
  registerVerify(program, session, env);
  return program;
}

/** Runs `kiln` with `argv` (the words after it) and answers the exit code (docs/cli.md). */
export async function main(argv: readonly string[], env: Environment): Promise<number> {
  const session = new Session(configPath(env.XDG_CONFIG_HOME, env.HOME), env);
  try {
    await buildProgram(session, env).parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    return report(error);
  }
}

/** Prints what went wrong (never a stack) and answers the exit code. */
function report(error: unknown): number {
  if (error instanceof ExitWith) return error.code;
  // commander has printed its message and the usage already.
  if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (error instanceof UsageError) {
    process.stderr.write(`kiln: ${error.message}\n`);
    return EXIT.usage;
  }
  if (error instanceof ApiError) {
    const { body, status } = error;
    const lines = [`kiln: ${body.error}`];
    for (const [field, message] of Object.entries(body.details ?? {})) {
      lines.push(`  ${field}: ${message}`);
    }
    if (status >= 500 && body.trace_id !== undefined && body.trace_id !== null) {
      lines.push(`  trace id: ${body.trace_id}`);
    }
    process.stderr.write(`${lines.join('\n')}\n`);
    return status === 0 ? EXIT.unavailable : EXIT.refused;
  }
  process.stderr.write(`kiln: ${error instanceof Error ? error.message : String(error)}\n`);
  return EXIT.software;
}
