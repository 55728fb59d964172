import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import { UsageError } from '../exit-codes.js';
import { fields, note, outputOption, printRecords, type Format, when } from '../output.js';
import { ask, askHidden, interactive, stdinLines } from '../prompt.js';
import { normaliseUrl, type Session } from '../session.js';

interface LoginOptions {
  email?: string;
  passwordStdin?: boolean;
  token?: string;
}

/** `kiln login`, `logout`, `whoami`, `password`. */
export function registerAuth(program: Command, session: Session, env: { KILN_TOKEN?: string }) {
  program
    .command('login [url]')
    .description(
      'Log in to kiln at URL (else KILN_URL, else the URL of the last login) and remember it',
    )
    .option('--email <e-mail>', 'your e-mail (asked on a terminal when not given)')
    .option('--password-stdin', 'read the password from standard input')
    .option('--token <token>', 'use an API token instead of a password (or set KILN_TOKEN)')
    .action(async (urlArgument: string | undefined, options: LoginOptions) => {
      const url = normaliseUrl(urlArgument ?? currentUrl(session));
      const tokenGiven =
        options.token ??
        (options.email === undefined && options.passwordStdin !== true
          ? env.KILN_TOKEN
          : undefined);
      if (tokenGiven !== undefined && tokenGiven !== '') {
        await loginWithToken(session, url, tokenGiven);
      } else {
        await loginWithPassword(session, url, options);
      }
    });

  program
    .command('logout')
    .description('Forget the token of the last login (the URL is kept)')
    .action(async () => {
      await session.save({ token: undefined, tenant: undefined });
      note(`logged out (${session.configPath})`);
    });

  program
    .command('whoami')
    .description('Who kiln takes you for: your user, and the API token when you use one')
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const me = await session.me();
      const tenant = await session.tenantId().catch(() => null);
      printRecords(options.output, { url: session.url, tenant_id: tenant, ...me }, () =>
        fields([
          ['URL', session.url],
          ['User', `${me.email} (${me.user_id})`],
          ['Administrator', me.system_admin ? 'yes (system:admin)' : 'no'],
          ['Tenant', tenant ?? '- (kiln tenant use <id|name>)'],
          ...(me.token === null
            ? []
            : ([
                ['API token', `${me.token.name} (${me.token.id})`],
                ['Permissions', me.token.permissions.join(', ')],
                ['Expires', when(me.token.expires_at)],
              ] as const)),
        ]),
      );
    });

  program
    .command('password')
    .description('Change your password (asked twice, or two lines on standard input)')
    .option(
      '--password-stdin',
      'read the current and the new password, one a line, from standard input',
    )
    .action(async (options: { passwordStdin?: boolean }) => {
      let current: string;
      let next: string;
      if (options.passwordStdin === true) {
        const lines = await stdinLines();
        if (lines.length < 2 || lines[0] === '' || lines[1] === '') {
          throw new UsageError(
            '--password-stdin: give the current password, then the new one, one a line',
          );
        }
        [current, next] = [lines[0]!, lines[1]!];
      } else {
        current = await askHidden('Current password: ', 'the passwords');
        next = await askHidden('New password: ', 'the passwords');
        if ((await askHidden('New password again: ', 'the passwords')) !== next) {
          throw new UsageError('the two new passwords differ; nothing was changed');
        }
      }
      const { access_token } = await unwrap(
        session.client().POST('/api/v1/auth/password', {
          body: { current_password: current, new_password: next },
        }),
      );
      // kiln answers with a new access token, and refuses the user's older ones from now on.
      if (session.usesStoredToken) {
        await session.save({ token: access_token });
        note('password changed');
      } else {
        note('password changed; the access token in KILN_TOKEN is refused from now on');
      }
    });
}

function currentUrl(session: Session): string {
  try {
    return session.url;
  } catch {
    throw new UsageError('which kiln? `kiln login <url>` (or set KILN_URL)');
  }
}

async function loginWithPassword(session: Session, url: string, options: LoginOptions) {
  let email = options.email;
  if (email === undefined) {
    if (!interactive()) throw new UsageError('--email is required without a terminal');
    email = (await ask('E-mail: ')).trim();
  }
  const password =
    options.passwordStdin === true
      ? ((await stdinLines())[0] ?? '')
      : await askHidden('Password: ', 'the password');
  if (password === '') throw new UsageError('the password is empty');
  const { access_token } = await unwrap(
    session.anonymous(url).POST('/api/v1/auth/login', { body: { email, password } }),
  );
  session.use(url, access_token);
  await session.save({ url, token: access_token, tenant: undefined });
  const tenant = await chooseTenant(session);
  note(`logged in to ${url} as ${email}${tenant}`);
}

/** Checks the token with kiln before it is stored; an API token brings its tenant. */
async function loginWithToken(session: Session, url: string, token: string) {
  session.use(url, token);
  const me = await session.me();
  await session.save({ url, token, tenant: me.token?.tenant_id });
  if (me.token === null) {
    note(`logged in to ${url} as ${me.email}${await chooseTenant(session)}`);
  } else {
    note(
      `logged in to ${url} as ${me.email} with API token ${me.token.name} (tenant ${me.token.tenant_id})`,
    );
  }
}

/** After a password login: --tenant (or KILN_TENANT) when given, else the user's only tenant. */
async function chooseTenant(session: Session): Promise<string> {
  if (session.tenantFlag !== undefined || session.tenantFromEnvironment) {
    const id = await session.tenantId();
    await session.save({ tenant: id });
    return `; tenant ${id}`;
  }
  const { tenants } = await unwrap(session.client().GET('/api/v1/auth/tenants'));
  if (tenants.length === 1) {
    await session.save({ tenant: tenants[0]!.id });
    return `; tenant ${tenants[0]!.name}`;
  }
  if (tenants.length === 0) return '; you are a member of no tenant yet';
  return `; choose a tenant: kiln tenant use <${tenants.map((t) => t.name).join('|')}>`;
}
