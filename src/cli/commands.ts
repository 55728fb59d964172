import { userInfo } from 'node:os';
import type { AuditLog } from '../audit/audit-log.js';
import type { TenancyService } from '../auth/tenancy.service.js';
import { InvalidRequestError, KilnError } from '../common/errors.js';

/** What a command prints: `text` for people, `json` with --json. */
export interface CommandOutput {
  readonly text: string;
  readonly json: unknown;
  /** The record the command changed, for its audit event. */
  readonly targetId?: string;
}

export interface CommandServices {
  readonly tenancy: TenancyService;
  readonly audit: AuditLog;
  readStdin(): Promise<string>;
}

export type Flags = Readonly<Record<string, string | boolean | undefined>>;

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') {
    throw new InvalidRequestError(`--${name} is required`, { [name]: 'required' });
  }
  return value;
}

/** What a command handler gets: the flags and the services. */
interface CommandInput {
  readonly flags: Flags;
  readonly services: CommandServices;
}

type CommandHandler = (input: CommandInput) => Promise<CommandOutput>;

/** Runs one admin command; the words are the positionals after `kiln-admin`. */
export async function runCommand(
  words: readonly string[],
  flags: Flags,
  services: CommandServices,
): Promise<CommandOutput> {
  const [noun, verb] = words;
  const handler = COMMANDS.get(`${noun} ${verb}`);
  const moved = MOVED.get(`${noun} ${verb}`);
  if (moved !== undefined) {
    throw new InvalidRequestError(
      `kiln-admin ${noun} ${verb} is an API command now: ${moved}, with the kiln command (docs/cli.md)`,
    );
  }
  if (handler === undefined) throw new InvalidRequestError(`Unknown command: ${words.join(' ')}`);
  const { action } = AUDITED.get(`${noun} ${verb}`)!;
  try {
    const output = await handler({ flags, services });
    await recordAdminAction(services.audit, action, 'success', output.targetId ?? null);
    return output;
  } catch (error) {
    await recordAdminAction(
      services.audit,
      action,
      error instanceof KilnError ? 'refused' : 'failed',
      null,
    );
    throw error;
  }
}

/**
 * What the audit log records of kiln-admin's commands (docs/adr/0049-audit-log.md): the action
 * the API's route for the same change records, by the actor `kiln-admin`, with the operating
 * system user who ran it where the API keeps the user agent.
 */
const AUDITED: ReadonlyMap<string, { action: string }> = new Map([
  ['user create', { action: 'user.create' }],
  ['user system-admin', { action: 'user.update' }],
]);

/** Records one kiln-admin action: no tenant, no HTTP status, never a flag's value. */
export async function recordAdminAction(
  audit: AuditLog,
  action: string,
  result: 'success' | 'refused' | 'failed',
  targetId: string | null,
  targetType: string | null = 'user',
): Promise<void> {
  await audit.record({
    actor: { type: 'kiln-admin', userId: null, email: null, apiTokenId: null },
    tenantId: null,
    action,
    target: targetType === null ? null : { type: targetType, id: targetId },
    result,
    status: null,
    requestId: null,
    sourceAddress: null,
    userAgent: `kiln-admin (os user ${osUser()})`.slice(0, 256),
  });
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}

async function userCreate({ flags, services }: CommandInput): Promise<CommandOutput> {
  if (flags['password-stdin'] !== true) {
    throw new InvalidRequestError('Pass the password on standard input with --password-stdin', {
      'password-stdin': 'required',
    });
  }
  const password = (await services.readStdin()).replace(/\r?\n$/, '');
  const user = await services.tenancy.createUser(required(flags, 'email'), password);
  return {
    text: `created user ${user.email}\n  id: ${user.id}`,
    json: { id: user.id, email: user.email, created_at: user.createdAt.toISOString() },
    targetId: user.id,
  };
}

async function userSystemAdmin({ flags, services }: CommandInput): Promise<CommandOutput> {
  const off = flags['off'] === true;
  const user = await services.tenancy.setSystemAdmin(required(flags, 'email'), !off);
  return {
    text: `${user.email} ${off ? 'is no longer' : 'is now'} an installation administrator (system:admin)`,
    json: { id: user.id, email: user.email, system_admin: user.systemAdmin },
    targetId: user.id,
  };
}

/** Every command, by `<noun> <verb>`: what must work before any HTTP server, or without one. */
const COMMANDS: ReadonlyMap<string, CommandHandler> = new Map([
  ['user create', userCreate],
  ['user system-admin', userSystemAdmin],
]);

/**
 * What kiln-admin did before the admin API: each is an HTTP command now, which any admin can run
 * from anywhere kiln's URL answers, checked by a permission (docs/cli.md).
 */
const MOVED: ReadonlyMap<string, string> = new Map([
  ['tenant create', 'kiln tenant create <name>'],
  [
    'tenant admission',
    'kiln settings admission --tenant <tenant> [--weight <n>] [--max-running <n>]',
  ],
  ['member add', 'kiln member add --email <e-mail> --role <role>'],
  ['member remove', 'kiln member remove <user>'],
  ['project create', 'kiln project create <name>'],
  ['project list', 'kiln project list'],
  ['project git-credentials', 'kiln project git-credentials <project>'],
  ['secret-manager set', 'kiln settings secret-manager set <type> -f <file>'],
  ['secret-manager list', 'kiln settings secret-manager list'],
  ['secret-manager remove', 'kiln settings secret-manager remove <type>'],
  ['registry set', 'kiln settings registry set <type> -f <file>'],
  ['registry list', 'kiln settings registry list'],
  ['registry remove', 'kiln settings registry remove <type>'],
]);
