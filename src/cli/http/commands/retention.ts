import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { UsageError } from '../exit-codes.js';
import { outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Session } from '../session.js';
import { positive } from './common.js';

type Preview = Schemas['RetentionPreviewDto'];
type Policy = Schemas['RetentionSettingsDto'];

/** `kiln retention …`: the policy that deletes finished builds, and its dry run. */
export function registerRetention(program: Command, session: Session) {
  const retention = program
    .command('retention')
    .description('Retention of finished builds: the policy and what it would delete now');

  retention
    .command('preview')
    .description(
      'What a retention pass would delete now in the tenant (settings:manage); --all: in every tenant (system:admin). Nothing is deleted',
    )
    .option('--all', 'every tenant of the installation (installation administrators)')
    .option('--limit <n>', 'builds listed (1-1000)', positive, 100)
    .addOption(outputOption())
    .action(async (options: { all?: boolean; limit: number; output: Format }) => {
      const query = { limit: options.limit };
      const answer =
        options.all === true
          ? await unwrap(session.client().GET('/api/v1/retention/preview', { params: { query } }))
          : await unwrap(
              session.client().GET('/api/v1/settings/retention/preview', {
                params: { query, header: await session.tenantHeader() },
              }),
            );
      printRecords(options.output, answer, () => describePreview(answer, options.all === true));
    });

  retention
    .command('policy')
    .description(
      "The tenant's retention policy; --days and --keep-last change it (installation administrators)",
    )
    .option(
      '--days <n|default>',
      'delete finished builds this many days after they ended (0: never)',
    )
    .option('--keep-last <n|default>', 'keep the newest n finished builds of each project (0: all)')
    .addOption(outputOption())
    .action(async (options: { days?: string; keepLast?: string; output: Format }) => {
      const header = await session.tenantHeader();
      const days = valueOf('--days', options.days);
      const keepLast = valueOf('--keep-last', options.keepLast);
      const answer =
        days === undefined && keepLast === undefined
          ? await unwrap(session.client().GET('/api/v1/settings/retention', { params: { header } }))
          : await unwrap(
              session.client().PATCH('/api/v1/tenants/{id}/retention', {
                params: { path: { id: header['X-Tenant-ID'] } },
                body: {
                  ...(days === undefined ? {} : { days }),
                  ...(keepLast === undefined ? {} : { keep_last: keepLast }),
                },
              }),
            );
      printRecords(options.output, answer, () => describePolicy(answer));
    });
}

/** A whole number, `default` (null: the installation's), or not given. */
function valueOf(flag: string, value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'default') return null;
  if (/^\d+$/.test(value)) return Number(value);
  throw new UsageError(`${flag}: a whole number, or default`);
}

function describePreview(preview: Preview, all: boolean): string {
  const scope = all ? 'every tenant' : 'the tenant';
  const head = `${preview.total} builds would go in ${scope} (${preview.by_rule.age} by age, ${preview.by_rule.count} past the newest of their project)`;
  if (preview.builds.length === 0) return head;
  const rows = preview.builds.map((build) => [
    build.id,
    ...(all ? [build.tenant_id] : []),
    build.project_id,
    String(build.build_number),
    when(build.completed_at),
    build.rule,
  ]);
  const header = ['ID', ...(all ? ['TENANT'] : []), 'PROJECT', '#', 'COMPLETED', 'RULE'];
  const more =
    preview.builds.length < preview.total ? `\n(first ${preview.builds.length}: --limit)` : '';
  return `${head}\n${table(header, rows)}${more}`;
}

function describePolicy(policy: Policy): string {
  const rule = (own: number | null, effective: number, what: string, off: string) =>
    `${effective === 0 ? off : what.replace('N', String(effective))}${own === null ? ' (the installation’s)' : ''}`;
  return [
    rule(
      policy.days,
      policy.effective.days,
      'finished builds go N days after they ended',
      'no age limit',
    ),
    rule(
      policy.keep_last,
      policy.effective.keep_last,
      'each project keeps its newest N finished builds',
      'no limit on finished builds per project',
    ),
  ].join('\n');
}
