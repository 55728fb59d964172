import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import { note, outputOption, printRecords, table, type Format, when } from '../output.js';
import { isUuid, type Session } from '../session.js';
import { positive, type PageOptions } from './common.js';

/** `kiln tenant …`: yours (list, use) and, for installation administrators, all of them. */
export function registerTenants(program: Command, session: Session) {
  const tenant = program.command('tenant').description("Tenants: yours, and an installation's");

  tenant
    .command('list')
    .description(
      'The tenants you are a member of, with your role (--all: every tenant; system:admin)',
    )
    .option('--all', 'every tenant of the installation (installation administrators)')
    .addOption(outputOption())
    .option('--page <n>', 'with --all: the page', positive, 1)
    .option('--limit <n>', 'with --all: tenants a page (1-100)', positive, 50)
    .action(async (options: PageOptions & { all?: boolean; output: Format }) => {
      const api = session.client();
      if (options.all === true) {
        const answer = await unwrap(
          api.GET('/api/v1/tenants', {
            params: { query: { page: options.page, limit: options.limit } },
          }),
        );
        printRecords(
          options.output,
          answer,
          () =>
            `${table(
              ['ID', 'NAME', 'CREATED'],
              answer.tenants.map((t) => [t.id, t.name, when(t.created_at)]),
            )}${footer(answer)}`,
        );
        return;
      }
      const answer = await unwrap(api.GET('/api/v1/auth/tenants'));
      const current = session.config.tenant;
      printRecords(options.output, answer, () =>
        answer.tenants.length === 0
          ? 'you are a member of no tenant'
          : table(
              ['', 'ID', 'NAME', 'ROLE'],
              answer.tenants.map((t) => [t.id === current ? '*' : '', t.id, t.name, t.role]),
            ),
      );
    });

  tenant
    .command('use <tenant>')
    .description('Act in this tenant (id or name) from now on')
    .action(async (ref: string) => {
      const id = await session.tenantIdOf(ref);
      await session.save({ tenant: id });
      note(`now acting in tenant ${ref}${ref === id ? '' : ` (${id})`}`);
    });

  tenant
    .command('create <name>')
    .description('Create a tenant (system:admin); its first admin is --admin-email, else you')
    .option('--admin-email <e-mail>', "the tenant's first admin")
    .addOption(outputOption())
    .action(async (name: string, options: { adminEmail?: string; output: Format }) => {
      const created = await unwrap(
        session.client().POST('/api/v1/tenants', {
          body: {
            name,
            ...(options.adminEmail === undefined ? {} : { admin_email: options.adminEmail }),
          },
        }),
      );
      printRecords(
        options.output,
        created,
        () => `created tenant ${created.name}\n  id: ${created.id}`,
      );
    });

  tenant
    .command('rename <tenant> <name>')
    .description('Rename a tenant (system:admin)')
    .addOption(outputOption())
    .action(async (ref: string, name: string, options: { output: Format }) => {
      const id = await allTenantsIdOf(session, ref);
      const renamed = await unwrap(
        session
          .client()
          .PATCH('/api/v1/tenants/{id}', { params: { path: { id } }, body: { name } }),
      );
      printRecords(options.output, renamed, () => `tenant ${renamed.id} is now ${renamed.name}`);
    });

  tenant
    .command('delete <tenant>')
    .description('Delete a tenant that has no build (system:admin)')
    .action(async (ref: string) => {
      const id = await allTenantsIdOf(session, ref);
      await unwrap(session.client().DELETE('/api/v1/tenants/{id}', { params: { path: { id } } }));
      note(`deleted tenant ${ref}`);
    });
}

function footer(page: { total: number; page: number; limit: number }): string {
  const pages = Math.max(1, Math.ceil(page.total / page.limit));
  return pages > 1 ? `\n(page ${page.page} of ${pages}, ${page.total} tenants: --page)` : '';
}

/** A tenant's id by id or name, among every tenant (installation administrators). */
async function allTenantsIdOf(session: Session, ref: string): Promise<string> {
  if (isUuid(ref)) return ref.toLowerCase();
  for (let page = 1; ; page++) {
    const answer = await unwrap(
      session.client().GET('/api/v1/tenants', { params: { query: { page, limit: 100 } } }),
    );
    const found = answer.tenants.find((t) => t.name === ref);
    if (found !== undefined) return found.id;
    if (page * answer.limit >= answer.total) return session.tenantIdOf(ref);
  }
}
