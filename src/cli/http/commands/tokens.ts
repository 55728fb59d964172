import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import { note, outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Schemas } from '../api/paths.js';
import type { Session } from '../session.js';
import { collect, positive } from './common.js';

type Permission = Schemas['CreateApiTokenDto']['permissions'];

/** `kiln token …`: API tokens for CI, scoped to the tenant and to some of your permissions. */
export function registerTokens(program: Command, session: Session) {
  const token = program.command('token').description('API tokens (for CI: KILN_TOKEN)');

  token
    .command('create')
    .description('Create an API token in the tenant; it is shown once')
    .requiredOption('--name <name>', 'what it is for')
    .option(
      '--permission <permission>',
      'a permission it carries (repeat; default: all of yours)',
      collect,
    )
    .option('--expires-in-days <n>', 'its lifetime in days', positive)
    .addOption(outputOption())
    .action(
      async (options: {
        name: string;
        permission?: string[];
        expiresInDays?: number;
        output: Format;
      }) => {
        const created = await unwrap(
          session.client().POST('/api/v1/tokens', {
            params: { header: await session.tenantHeader() },
            body: {
              name: options.name,
              // kiln checks each name; a wrong one is refused (exit 3).
              ...(options.permission === undefined
                ? {}
                : { permissions: options.permission as Permission }),
              ...(options.expiresInDays === undefined
                ? {}
                : { expires_in_days: options.expiresInDays }),
            },
          }),
        );
        printRecords(options.output, created, () => {
          note(`created API token ${created.name} (${created.id}); it is shown only now:`);
          return created.token;
        });
      },
    );

  token
    .command('list')
    .description("The tenant's API tokens (never their secret)")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const answer = await unwrap(
        session
          .client()
          .GET('/api/v1/tokens', { params: { header: await session.tenantHeader() } }),
      );
      printRecords(options.output, answer, () =>
        table(
          ['ID', 'NAME', 'PERMISSIONS', 'EXPIRES', 'LAST USED'],
          answer.tokens.map((t) => [
            t.id,
            t.name,
            t.permissions.join(','),
            when(t.expires_at),
            when(t.last_used_at),
          ]),
        ),
      );
    });

  token
    .command('revoke <id>')
    .description('Revoke an API token: every replica refuses it a moment later')
    .action(async (id: string) => {
      await unwrap(
        session.client().DELETE('/api/v1/tokens/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      note(`revoked API token ${id}`);
    });
}
