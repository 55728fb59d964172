import { Argument, type Command } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { UsageError } from '../exit-codes.js';
import { note, outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Session } from '../session.js';
import { wholeNumber } from './common.js';
import { readInput } from './files.js';

type RegistryType = Schemas['RegistrySettingsDto']['type'];
type SecretManagerType = Schemas['SecretManagerSettingsDto']['type'];
const REGISTRY_TYPES = ['harbor', 'quay', 'artifactory', 's3'] as const satisfies RegistryType[];
const SECRET_MANAGER_TYPES = [
  'vault',
  'aws_secretsmanager',
  'azure_keyvault',
] as const satisfies SecretManagerType[];

/** `kiln settings …`: the tenant's registries, secret managers and admission (settings:manage). */
export function registerSettings(program: Command, session: Session) {
  const settings = program
    .command('settings')
    .description("The tenant's registries, secret managers and admission (settings:manage)");
  registerRegistries(settings, session);
  registerSecretManagers(settings, session);
  registerAdmission(settings, session);
}

function registerRegistries(settings: Command, session: Session) {
  const group = settings.command('registry').description("The tenant's registry settings");
  group
    .command('list')
    .description("The tenant's registry settings, one per type")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const params = { header: await session.tenantHeader() };
      const answer = await unwrap(session.client().GET('/api/v1/settings/registries', { params }));
      printRecords(options.output, answer, () => listed(answer.registries, 'registry'));
    });
  group
    .command('set')
    .description("Set the tenant's registry of a type from a JSON or YAML file")
    .addArgument(new Argument('<type>', 'the registry type').choices(REGISTRY_TYPES))
    .requiredOption('-f, --file <file|->', 'its settings (JSON or YAML; - reads standard input)')
    .addOption(outputOption())
    .action(async (type: RegistryType, options: { file: string; output: Format }) => {
      const saved = await unwrap(
        session.client().PUT('/api/v1/settings/registries/{type}', {
          params: { path: { type }, header: await session.tenantHeader() },
          body: await settingsFrom(options.file),
        }),
      );
      printRecords(options.output, saved, () => shown(saved, 'registry'));
    });
  group
    .command('remove')
    .description("Remove the tenant's registry settings of a type")
    .addArgument(new Argument('<type>', 'the registry type').choices(REGISTRY_TYPES))
    .action(async (type: RegistryType) => {
      await unwrap(
        session.client().DELETE('/api/v1/settings/registries/{type}', {
          params: { path: { type }, header: await session.tenantHeader() },
        }),
      );
      note(`removed the tenant's ${type} registry settings`);
    });
}

function registerSecretManagers(settings: Command, session: Session) {
  const group = settings
    .command('secret-manager')
    .description("The tenant's secret manager settings");
  group
    .command('list')
    .description("The tenant's secret manager settings, one per type")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const params = { header: await session.tenantHeader() };
      const answer = await unwrap(
        session.client().GET('/api/v1/settings/secret-managers', { params }),
      );
      printRecords(options.output, answer, () => listed(answer.secret_managers, 'secret manager'));
    });
  group
    .command('set')
    .description("Set the tenant's secret manager of a type from a JSON or YAML file")
    .addArgument(new Argument('<type>', 'the secret manager').choices(SECRET_MANAGER_TYPES))
    .requiredOption('-f, --file <file|->', 'its settings (JSON or YAML; - reads standard input)')
    .addOption(outputOption())
    .action(async (type: SecretManagerType, options: { file: string; output: Format }) => {
      const saved = await unwrap(
        session.client().PUT('/api/v1/settings/secret-managers/{type}', {
          params: { path: { type }, header: await session.tenantHeader() },
          body: await settingsFrom(options.file),
        }),
      );
      printRecords(options.output, saved, () => shown(saved, 'secret manager'));
    });
  group
    .command('remove')
    .description("Remove the tenant's secret manager settings of a type")
    .addArgument(new Argument('<type>', 'the secret manager').choices(SECRET_MANAGER_TYPES))
    .action(async (type: SecretManagerType) => {
      await unwrap(
        session.client().DELETE('/api/v1/settings/secret-managers/{type}', {
          params: { path: { type }, header: await session.tenantHeader() },
        }),
      );
      note(`removed the tenant's ${type} secret manager settings`);
    });
}

function registerAdmission(settings: Command, session: Session) {
  settings
    .command('admission')
    .description(
      "The tenant's weight in the fair share of build slots and its own limit on running " +
        'builds; --weight and --max-running change them (installation administrators)',
    )
    .option('--weight <n>', 'its weight, 1-1000', wholeNumber)
    .option('--max-running <n|default>', 'its own limit on running builds, or default')
    .addOption(outputOption())
    .action(async (options: { weight?: number; maxRunning?: string; output: Format }) => {
      const header = await session.tenantHeader();
      const maxRunning = maxRunningOf(options.maxRunning);
      const answer =
        options.weight === undefined && maxRunning === undefined
          ? await unwrap(session.client().GET('/api/v1/settings/admission', { params: { header } }))
          : await unwrap(
              session.client().PATCH('/api/v1/tenants/{id}/admission', {
                params: { path: { id: header['X-Tenant-ID'] } },
                body: {
                  ...(options.weight === undefined ? {} : { weight: options.weight }),
                  ...(maxRunning === undefined ? {} : { max_running: maxRunning }),
                },
              }),
            );
      printRecords(
        options.output,
        answer,
        () =>
          `weight ${answer.weight}, running builds at most ${answer.max_running ?? 'the default (KILN_TENANT_MAX_RUNNING)'}`,
      );
    });
}

/** `--max-running`: a whole number, `default` (null: the installation's limit), or not given. */
function maxRunningOf(value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'default') return null;
  if (/^\d+$/.test(value)) return Number(value);
  throw new UsageError('--max-running: a whole number, or default');
}

async function settingsFrom(file: string): Promise<Record<string, unknown>> {
  const body = await readInput(file);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new UsageError(`${file}: the settings are an object`);
  }
  return body as Record<string, unknown>;
}

function listed(
  records: ReadonlyArray<{ type: string; settings: Record<string, unknown>; updated_at: string }>,
  what: string,
): string {
  if (records.length === 0) return `the tenant has no ${what} settings`;
  return table(
    ['TYPE', 'SETTINGS', 'UPDATED'],
    records.map((r) => [r.type, JSON.stringify(r.settings), when(r.updated_at)]),
  );
}

function shown(saved: { type: string; settings: Record<string, unknown> }, what: string): string {
  return `the tenant's ${saved.type} ${what}:\n${JSON.stringify(saved.settings, null, 2)}`;
}
