import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { UsageError } from '../exit-codes.js';
import { outputOption, printRecords, table, type Format, when } from '../output.js';
import { askHidden, stdinLines } from '../prompt.js';
import { isUuid, type Session } from '../session.js';
import { positive, type PageOptions } from './common.js';

type User = Schemas['UserDto'];

/** `kiln user …`: the installation's users (system:admin). */
export function registerUsers(program: Command, session: Session) {
  const user = program.command('user').description("The installation's users (system:admin)");

  user
    .command('create')
    .description('Create a user; the password is asked, or read with --password-stdin')
    .requiredOption('--email <e-mail>', "the user's e-mail")
    .option('--password-stdin', 'read the password from standard input')
    .addOption(outputOption())
    .action(async (options: { email: string; passwordStdin?: boolean; output: Format }) => {
      const password =
        options.passwordStdin === true
          ? ((await stdinLines())[0] ?? '')
          : await askHidden(`Password for ${options.email}: `, 'the password');
      const created = await unwrap(
        session.client().POST('/api/v1/users', { body: { email: options.email, password } }),
      );
      printRecords(
        options.output,
        created,
        () => `created user ${created.email}\n  id: ${created.id}`,
      );
    });

  user
    .command('list')
    .description('Every user, by e-mail')
    .option('--page <n>', 'the page', positive, 1)
    .option('--limit <n>', 'users a page (1-100)', positive, 50)
    .addOption(outputOption())
    .action(async (options: PageOptions & { output: Format }) => {
      const answer = await unwrap(
        session.client().GET('/api/v1/users', {
          params: { query: { page: options.page, limit: options.limit } },
        }),
      );
      printRecords(options.output, answer, () =>
        table(
          ['ID', 'E-MAIL', 'DISABLED', 'ADMIN', 'CREATED'],
          answer.users.map((u) => [
            u.id,
            u.email,
            u.disabled ? 'yes' : 'no',
            u.system_admin ? 'yes' : 'no',
            when(u.created_at),
          ]),
        ),
      );
    });

  const change = (
    name: string,
    description: string,
    patch: { disabled?: boolean; system_admin?: boolean },
  ) =>
    user
      .command(`${name} <user>`)
      .description(`${description} (by e-mail or id)`)
      .addOption(outputOption())
      .action(async (ref: string, options: { output: Format }) => {
        const id = await userIdOf(session, ref);
        const changed = await unwrap(
          session.client().PATCH('/api/v1/users/{id}', { params: { path: { id } }, body: patch }),
        );
        printRecords(options.output, changed, () => describe(changed));
      });
  change('disable', 'Disable a user: its next request is refused', { disabled: true });
  change('enable', 'Enable a disabled user', { disabled: false });
  user
    .command('system-admin <user>')
    .description('Make a user an installation administrator, or take it back with --off')
    .option('--off', 'take the role back')
    .addOption(outputOption())
    .action(async (ref: string, options: { off?: boolean; output: Format }) => {
      const id = await userIdOf(session, ref);
      const changed = await unwrap(
        session.client().PATCH('/api/v1/users/{id}', {
          params: { path: { id } },
          body: { system_admin: options.off !== true },
        }),
      );
      printRecords(options.output, changed, () => describe(changed));
    });
}

function describe(user: User): string {
  return `${user.email}: ${user.disabled ? 'disabled' : 'enabled'}${user.system_admin ? ', installation administrator' : ''}`;
}

/** A user's id by id or e-mail, looked up page by page. */
async function userIdOf(session: Session, ref: string): Promise<string> {
  if (isUuid(ref)) return ref.toLowerCase();
  const email = ref.toLowerCase();
  for (let page = 1; ; page++) {
    const answer = await unwrap(
      session.client().GET('/api/v1/users', { params: { query: { page, limit: 100 } } }),
    );
    const found = answer.users.find((u) => u.email.toLowerCase() === email);
    if (found !== undefined) return found.id;
    if (page * answer.limit >= answer.total) throw new UsageError(`no user has the e-mail ${ref}`);
  }
}
