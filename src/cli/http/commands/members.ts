import { type Command, Option } from 'commander';
import { unwrap } from '../api/client.js';
import { UsageError } from '../exit-codes.js';
import { note, outputOption, printRecords, table, type Format, when } from '../output.js';
import { isUuid, type Session } from '../session.js';

/** `kiln member …`: who belongs to the tenant, with which role (member:manage). */
export function registerMembers(program: Command, session: Session) {
  const member = program.command('member').description("The tenant's members (member:manage)");

  member
    .command('list')
    .description("The tenant's members and their roles")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const answer = await unwrap(
        session
          .client()
          .GET('/api/v1/members', { params: { header: await session.tenantHeader() } }),
      );
      printRecords(options.output, answer, () =>
        table(
          ['USER ID', 'E-MAIL', 'ROLE', 'DISABLED', 'SINCE'],
          answer.members.map((m) => [
            m.user_id,
            m.email,
            m.role,
            m.disabled ? 'yes' : 'no',
            when(m.member_since),
          ]),
        ),
      );
    });

  member
    .command('add')
    .description('Add an existing user to the tenant, or give a member another role')
    .requiredOption('--email <e-mail>', "the user's e-mail")
    .addOption(
      new Option('--role <role>', 'the role in the tenant')
        .choices(['admin', 'developer', 'viewer'])
        .makeOptionMandatory(),
    )
    .addOption(outputOption())
    .action(
      async (options: {
        email: string;
        role: 'admin' | 'developer' | 'viewer';
        output: Format;
      }) => {
        const added = await unwrap(
          session.client().POST('/api/v1/members', {
            params: { header: await session.tenantHeader() },
            body: { email: options.email, role: options.role },
          }),
        );
        printRecords(options.output, added, () => `${added.email} is ${added.role} of the tenant`);
      },
    );

  member
    .command('remove <user>')
    .description('Take a user (e-mail or id) out of the tenant')
    .action(async (ref: string) => {
      const header = await session.tenantHeader();
      let userId = ref.toLowerCase();
      if (!isUuid(ref)) {
        const { members } = await unwrap(
          session.client().GET('/api/v1/members', { params: { header } }),
        );
        const found = members.find((m) => m.email.toLowerCase() === ref.toLowerCase());
        if (found === undefined) throw new UsageError(`${ref} is not a member of the tenant`);
        userId = found.user_id;
      }
      await unwrap(
        session
          .client()
          .DELETE('/api/v1/members/{userId}', { params: { header, path: { userId } } }),
      );
      note(`${ref} is no longer a member of the tenant`);
    });
}
