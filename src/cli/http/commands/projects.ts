import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { UsageError } from '../exit-codes.js';
import { fields, note, outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Session } from '../session.js';
import { projectIdOf } from './common.js';

type Project = Schemas['ProjectResponse'];

interface GitCredentialsOptions {
  username?: string;
  password?: string;
  clear?: boolean;
  output: Format;
}

interface UpdateOptions {
  name?: string;
  repo?: string | false;
  registry?: string | false;
  output: Format;
}

/** `kiln project …`: the tenant's projects (reading: build:list; changing: project:manage). */
export function registerProjects(program: Command, session: Session) {
  const project = program.command('project').description("The tenant's projects");
  registerReads(project, session);
  registerChanges(project, session);
  registerGitCredentials(project, session);
}

/** `project list` and `get`. */
function registerReads(project: Command, session: Session) {
  project
    .command('list')
    .description("The tenant's projects")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const answer = await unwrap(
        session
          .client()
          .GET('/api/v1/projects', { params: { header: await session.tenantHeader() } }),
      );
      printRecords(options.output, answer, () =>
        answer.projects.length === 0
          ? 'the tenant has no project'
          : table(
              ['ID', 'NAME', 'REPOSITORY', 'REGISTRY'],
              answer.projects.map((p) => [
                p.id,
                p.name,
                p.git_repository_url ?? '',
                p.default_registry ?? '',
              ]),
            ),
      );
    });

  project
    .command('get <project>')
    .description('One project (id or name)')
    .addOption(outputOption())
    .action(async (ref: string, options: { output: Format }) => {
      const id = await projectIdOf(session, ref);
      const found = await unwrap(
        session.client().GET('/api/v1/projects/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, found, () => describe(found));
    });
}

/** `project create`, `update` and `delete`. */
function registerChanges(project: Command, session: Session) {
  project
    .command('create <name>')
    .description('Create a project')
    .option('--repo <git URL>', 'its git repository (never with credentials: see git-credentials)')
    .option('--registry <host[:port][/path]>', 'where builds that name no repository push')
    .addOption(outputOption())
    .action(async (name: string, options: { repo?: string; registry?: string; output: Format }) => {
      const created = await unwrap(
        session.client().POST('/api/v1/projects', {
          params: { header: await session.tenantHeader() },
          body: {
            name,
            ...(options.repo === undefined ? {} : { git_repository_url: options.repo }),
            ...(options.registry === undefined ? {} : { default_registry: options.registry }),
          },
        }),
      );
      printRecords(
        options.output,
        created,
        () => `created project ${created.name}\n  id: ${created.id}`,
      );
    });

  project
    .command('update <project>')
    .description('Change a project: what is given changes')
    .option('--name <name>', 'a new name')
    .option('--repo <git URL>', 'a new repository')
    .option('--no-repo', 'remove the repository')
    .option('--registry <host[:port][/path]>', 'a new default registry')
    .option('--no-registry', 'remove the default registry')
    .addOption(outputOption())
    .action(async (ref: string, options: UpdateOptions) => {
      const body = {
        ...(options.name === undefined ? {} : { name: options.name }),
        ...(options.repo === undefined
          ? {}
          : { git_repository_url: options.repo === false ? null : options.repo }),
        ...(options.registry === undefined
          ? {}
          : { default_registry: options.registry === false ? null : options.registry }),
      };
      if (Object.keys(body).length === 0) {
        throw new UsageError(
          'nothing to change: --name, --repo, --no-repo, --registry or --no-registry',
        );
      }
      const id = await projectIdOf(session, ref);
      const changed = await unwrap(
        session.client().PATCH('/api/v1/projects/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
          body,
        }),
      );
      printRecords(options.output, changed, () => describe(changed));
    });

  project
    .command('delete <project>')
    .description('Delete a project that has no build')
    .action(async (ref: string) => {
      const id = await projectIdOf(session, ref);
      await unwrap(
        session.client().DELETE('/api/v1/projects/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      note(`deleted project ${ref}`);
    });
}

/** `project git-credentials`: a secret reference, never a password (settings:manage). */
function registerGitCredentials(project: Command, session: Session) {
  project
    .command('git-credentials <project>')
    .description(
      'Show, set (--username and --password) or remove (--clear) the credentials builds of the ' +
        'project clone with (settings:manage)',
    )
    .option('--username <user>', 'the user name (or a secret reference to it)')
    .option(
      '--password <reference>',
      'a secret reference (vault:…, aws:…, azure:…), never a password',
    )
    .option('--clear', 'clone without credentials')
    .addOption(outputOption())
    .action(async (ref: string, options: GitCredentialsOptions) => {
      const id = await projectIdOf(session, ref);
      const params = { path: { id }, header: await session.tenantHeader() };
      const api = session.client();
      const { username, password, clear } = options;
      if (clear === true) {
        if (username !== undefined || password !== undefined) {
          throw new UsageError('--clear takes no --username or --password');
        }
        await unwrap(api.DELETE('/api/v1/projects/{id}/git-credentials', { params }));
        note(`builds of ${ref} clone without credentials`);
        return;
      }
      if (username === undefined && password === undefined) {
        const current = await unwrap(api.GET('/api/v1/projects/{id}/git-credentials', { params }));
        printRecords(options.output, current, () =>
          fields([
            ['Username', current.username],
            ['Password', current.password],
          ]),
        );
        return;
      }
      if (username === undefined || password === undefined) {
        throw new UsageError('give both --username and --password <secret reference>, or --clear');
      }
      const saved = await unwrap(
        api.PUT('/api/v1/projects/{id}/git-credentials', { params, body: { username, password } }),
      );
      printRecords(
        options.output,
        saved,
        () =>
          `builds of ${ref} clone as ${saved.username}; the password is resolved when each build starts`,
      );
    });
}

function describe(project: Project): string {
  return fields([
    ['ID', project.id],
    ['Name', project.name],
    ['Repository', project.git_repository_url ?? '-'],
    ['Registry', project.default_registry ?? '-'],
    ['Created', when(project.created_at)],
    ['Updated', when(project.updated_at)],
  ]);
}
