import { type Command, Option } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Session } from '../session.js';
import { positive } from './common.js';

type AuditEvent = Schemas['AuditEventDto'];

interface ListOptions {
  allTenants?: boolean;
  action?: string;
  actor?: string;
  target?: string;
  result?: 'success' | 'refused' | 'failed';
  since?: string;
  until?: string;
  page: number;
  limit: number;
  output: Format;
}

/** `kiln audit …`: the audit log (docs/operations.md "Audit log"). */
export function registerAudit(program: Command, session: Session) {
  const audit = program
    .command('audit')
    .description("The audit log: the tenant's (its admins) or every tenant's (system:admin)");

  audit
    .command('list')
    .description(
      "Audit events, newest first: the tenant's (audit:read), or with --all-tenants every " +
        "tenant's and the installation's own (system:admin; --tenant <id|none> narrows it)",
    )
    .option('--all-tenants', "every tenant's events (installation administrators)")
    .option('--action <name>', 'one action, e.g. build.cancel')
    .option('--actor <user-id>', "one acting user's events")
    .option('--target <id>', "one target's events (a build, project, user, … id)")
    .addOption(
      new Option('--result <result>', 'one outcome').choices(['success', 'refused', 'failed']),
    )
    .option('--since <time>', 'events at or after this ISO 8601 time')
    .option('--until <time>', 'events before this ISO 8601 time')
    .option('--page <n>', 'the page', positive, 1)
    .option('--limit <n>', 'events a page (1-100)', positive, 50)
    .addOption(outputOption())
    .action(async (options: ListOptions) => {
      const filters = {
        page: options.page,
        limit: options.limit,
        ...(options.action === undefined ? {} : { action: options.action }),
        ...(options.actor === undefined ? {} : { actor: options.actor }),
        ...(options.target === undefined ? {} : { target_id: options.target }),
        ...(options.result === undefined ? {} : { result: options.result }),
        ...(options.since === undefined ? {} : { since: options.since }),
        ...(options.until === undefined ? {} : { until: options.until }),
      };
      const api = session.client();
      const answer =
        options.allTenants === true
          ? await unwrap(
              api.GET('/api/v1/audit/installation', {
                params: { query: { ...filters, ...(await tenantFilter(session)) } },
              }),
            )
          : await unwrap(
              api.GET('/api/v1/audit', {
                params: { query: filters, header: await session.tenantHeader() },
              }),
            );
      printRecords(options.output, answer, () =>
        answer.events.length === 0
          ? 'no audit events'
          : `${table(
              ['TIME', 'ACTOR', 'TENANT', 'ACTION', 'TARGET', 'RESULT', 'STATUS', 'FROM'],
              answer.events.map(row),
            )}\n${pageLine(answer)}`,
      );
    });
}

/** With --all-tenants, --tenant narrows the list to one tenant (or `none`): never the stored one. */
async function tenantFilter(session: Session): Promise<{ tenant_id?: string }> {
  const ref = session.tenantFlag;
  if (ref === undefined || ref === '') return {};
  return { tenant_id: ref === 'none' ? 'none' : await session.tenantIdOf(ref) };
}

function row(event: AuditEvent): string[] {
  const { actor, target } = event;
  const who =
    actor.type === 'user' || actor.type === 'api_token'
      ? `${actor.email ?? actor.user_id ?? '?'}${actor.type === 'api_token' ? ' (token)' : ''}`
      : actor.email === null
        ? actor.type
        : `${actor.type} (${actor.email})`;
  return [
    when(event.occurred_at),
    who,
    event.tenant_id ?? '-',
    event.action,
    target === null ? '-' : `${target.type} ${target.id ?? '-'}`,
    event.result,
    event.status === null ? '-' : String(event.status),
    event.source_address ?? '-',
  ];
}

function pageLine(answer: { total: number; page: number; limit: number }): string {
  const pages = Math.max(1, Math.ceil(answer.total / answer.limit));
  return `page ${answer.page} of ${pages} (${answer.total} events)`;
}
