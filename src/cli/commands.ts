import type { TenantAdmissionSettings } from '../admission/tenant-settings.repository.js';
import type { TenancyService } from '../auth/tenancy.service.js';
import { InvalidRequestError, NotFoundError } from '../common/errors.js';
import { withoutCredentialsDeep } from '../common/url-credentials.js';
import type { IntegrationsService } from '../integrations/integrations.service.js';
import { type ProjectsService, toProjectResponse } from '../projects/projects.service.js';

/** What a command prints: `text` for people, `json` with --json. */
export interface CommandOutput {
  readonly text: string;
  readonly json: unknown;
}

export interface CommandServices {
  readonly tenancy: TenancyService;
  readonly projects: ProjectsService;
  readonly integrations: IntegrationsService;
  readonly admission: TenantAdmissionSettings;
  readStdin(): Promise<string>;
  readFile(path: string): Promise<string>;
}

export type Flags = Readonly<Record<string, string | boolean | undefined>>;

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') {
    throw new InvalidRequestError(`--${name} is required`, { [name]: 'required' });
  }
  return value;
}

/** What a command handler gets: the words after its noun and verb, the flags, the services. */
interface CommandInput {
  readonly noun: string;
  readonly rest: readonly string[];
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
  const [noun, verb, ...rest] = words;
  const handler = COMMANDS.get(`${noun} ${verb}`);
  if (handler === undefined) throw new InvalidRequestError(`Unknown command: ${words.join(' ')}`);
  return handler({ noun: noun!, rest, flags, services });
}

async function tenantCreate({ rest, services }: CommandInput): Promise<CommandOutput> {
  const name = rest.join(' ');
  if (name === '')
    throw new InvalidRequestError('Usage: kiln-admin tenant create <name>', { name: 'required' });
  const tenant = await services.tenancy.createTenant(name);
  return {
    text: `created tenant ${tenant.name}\n  id: ${tenant.id}`,
    json: { id: tenant.id, name: tenant.name, created_at: tenant.createdAt.toISOString() },
  };
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
  };
}

async function userSystemAdmin({ flags, services }: CommandInput): Promise<CommandOutput> {
  const off = flags['off'] === true;
  const user = await services.tenancy.setSystemAdmin(required(flags, 'email'), !off);
  return {
    text: `${user.email} ${off ? 'is no longer' : 'is now'} an installation administrator (system:admin)`,
    json: { id: user.id, email: user.email, system_admin: user.systemAdmin },
  };
}

async function memberAdd({ flags, services }: CommandInput): Promise<CommandOutput> {
  const membership = await services.tenancy.addMember(
    required(flags, 'tenant'),
    required(flags, 'email'),
    required(flags, 'role'),
  );
  return {
    text: `${required(flags, 'email')} is ${membership.role} of tenant ${membership.tenantId}`,
    json: { tenant_id: membership.tenantId, user_id: membership.userId, role: membership.role },
  };
}

async function memberRemove({ flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = required(flags, 'tenant');
  const email = required(flags, 'email');
  await services.tenancy.removeMember(tenant, email);
  return {
    text: `${email} is no longer a member of tenant ${tenant}`,
    json: { tenant, email, removed: true },
  };
}

async function projectCreate({ flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const repo = flags['repo'];
  const registry = flags['registry'];
  const project = await services.projects.create(
    tenant.id,
    required(flags, 'name'),
    typeof repo === 'string' ? repo : undefined,
    typeof registry === 'string' ? registry : undefined,
  );
  return {
    text: `created project ${project.name} in tenant ${tenant.name}\n  id: ${project.id}`,
    json: toProjectResponse(project),
  };
}

async function projectList({ flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const projects = (await services.projects.list(tenant.id)).map(toProjectResponse);
  const table = formatTable([
    ['ID', 'NAME', 'REPOSITORY'],
    ...projects.map((p) => [p.id, p.name, p.git_repository_url ?? '']),
  ]);
  return {
    text: projects.length === 0 ? `tenant ${tenant.name} has no projects` : table,
    json: { projects },
  };
}

async function projectGitCredentials({ flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const ref = required(flags, 'project');
  const project = (await services.projects.list(tenant.id)).find(
    (p) => p.id === ref.toLowerCase() || p.name === ref,
  );
  if (project === undefined) throw new NotFoundError(`No project ${ref} in tenant ${tenant.name}`);
  const clear = flags['clear'] === true;
  await services.projects.setGitCredentials(
    tenant.id,
    project.id,
    clear ? null : { username: required(flags, 'username'), password: required(flags, 'password') },
  );
  return {
    text: clear
      ? `builds of ${project.name} clone without credentials`
      : `builds of ${project.name} clone as ${required(flags, 'username')}; the password is resolved when each build starts`,
    json: { project_id: project.id, git_credentials: !clear },
  };
}

/** `registry set` and `secret-manager set`: the noun says which. */
async function integrationSet({ noun, flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const settings = await readSettings(flags, services);
  const record =
    noun === 'registry'
      ? await services.integrations.setRegistry(tenant.id, required(flags, 'type'), settings)
      : await services.integrations.setSecretManager(tenant.id, required(flags, 'type'), settings);
  const shown = withoutCredentialsDeep(record.settings);
  return {
    text: `tenant ${tenant.name} uses this ${record.type} ${noun === 'registry' ? 'registry' : 'secret manager'}:\n${indent(JSON.stringify(shown, null, 2))}`,
    json: { tenant_id: tenant.id, type: record.type, settings: shown },
  };
}

/** `registry list` and `secret-manager list`. */
async function integrationList({ noun, flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const records =
    noun === 'registry'
      ? await services.integrations.registries(tenant.id)
      : await services.integrations.secretManagers(tenant.id);
  const listed = records.map((r) => ({
    type: r.type,
    settings: withoutCredentialsDeep(r.settings),
    updated_at: r.updatedAt.toISOString(),
  }));
  const text =
    listed.length === 0
      ? `tenant ${tenant.name} has no ${noun === 'registry' ? 'registries' : 'secret managers'}`
      : formatTable([
          ['TYPE', 'SETTINGS', 'UPDATED'],
          ...listed.map((r) => [r.type, JSON.stringify(r.settings), r.updated_at]),
        ]);
  return {
    text,
    json: {
      tenant_id: tenant.id,
      [noun === 'registry' ? 'registries' : 'secret_managers']: listed,
    },
  };
}

/** `registry remove` and `secret-manager remove`. */
async function integrationRemove({ noun, flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const type = required(flags, 'type');
  if (noun === 'registry') await services.integrations.removeRegistry(tenant.id, type);
  else await services.integrations.removeSecretManager(tenant.id, type);
  return {
    text: `removed the ${type} settings of tenant ${tenant.name}`,
    json: { tenant_id: tenant.id, type },
  };
}

/**
 * `tenant admission --tenant <t> [--weight <n>] [--max-running <n>|default]`: shows, or changes,
 * the tenant's weight in the fair share and its own limit on running builds.
 */
async function tenantAdmission({ flags, services }: CommandInput): Promise<CommandOutput> {
  const tenant = await services.tenancy.resolveTenant(required(flags, 'tenant'));
  const integer = (name: string): number | undefined => {
    const value = flags[name];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || !/^\d+$/.test(value)) {
      throw new InvalidRequestError(`--${name} must be a whole number`, { [name]: 'an integer' });
    }
    return Number(value);
  };
  const weight = integer('weight');
  const maxRunning = flags['max-running'] === 'default' ? null : integer('max-running');
  const settings =
    weight === undefined && maxRunning === undefined
      ? await services.admission.get(tenant.id)
      : await services.admission.set(tenant.id, { weight, maxRunning });
  const limit =
    settings.maxRunning === null
      ? 'the default (KILN_TENANT_MAX_RUNNING)'
      : String(settings.maxRunning);
  return {
    text: `tenant ${tenant.name}: weight ${settings.weight}, running builds at most ${limit}`,
    json: { tenant_id: tenant.id, weight: settings.weight, max_running: settings.maxRunning },
  };
}

/** Every command, by `<noun> <verb>`. */
const COMMANDS: ReadonlyMap<string, CommandHandler> = new Map([
  ['tenant create', tenantCreate],
  ['tenant admission', tenantAdmission],
  ['user create', userCreate],
  ['user system-admin', userSystemAdmin],
  ['member add', memberAdd],
  ['member remove', memberRemove],
  ['project create', projectCreate],
  ['project list', projectList],
  ['project git-credentials', projectGitCredentials],
  ['secret-manager set', integrationSet],
  ['registry set', integrationSet],
  ['secret-manager list', integrationList],
  ['registry list', integrationList],
  ['secret-manager remove', integrationRemove],
  ['registry remove', integrationRemove],
]);

/** `--settings-file <path>` (or `-`: standard input), parsed as JSON. */
async function readSettings(flags: Flags, services: CommandServices): Promise<unknown> {
  const path = required(flags, 'settings-file');
  const text = path === '-' ? await services.readStdin() : await services.readFile(path);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new InvalidRequestError(`${path === '-' ? 'Standard input' : path} is not JSON`, {
      'settings-file': 'must hold a JSON object',
    });
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

/** Left-aligned columns separated by two spaces, trailing blanks trimmed. */
export function formatTable(rows: ReadonlyArray<readonly string[]>): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
