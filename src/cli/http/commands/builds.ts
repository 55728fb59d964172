import { type Command, Option } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import type { BuildFlags } from '../manifest.js';
import {
  fields,
  note,
  outputOption,
  printRecords,
  render,
  table,
  type Format,
  when,
} from '../output.js';
import type { Session } from '../session.js';
import { runBuild } from '../build-run.js';
import { addBuildOptions, createBody, createBuild } from './build-options.js';
import { positive, projectIdOf } from './common.js';

type Build = Schemas['BuildDto'];
type BuildStatus = Schemas['BuildStatusDto'];
const STATUSES = ['queued', 'in_progress', 'success', 'failed', 'cancelled'] as const;
type Status = (typeof STATUSES)[number];

interface ListOptions {
  status?: Status;
  project?: string;
  page: number;
  limit: number;
  sortBy?: 'created_at' | 'updated_at' | 'build_number';
  sortOrder?: 'asc' | 'desc';
  watch?: boolean;
  interval: number;
  output: Format;
}

/** `kiln build …`: create, start, run, follow and manage builds. */
export function registerBuilds(program: Command, session: Session) {
  const build = program.command('build').description("The tenant's builds");
  registerCreate(build, session);
  registerActions(build, session);
  registerReads(build, session);
}

/** `build create` and `build run`. */
function registerCreate(build: Command, session: Session) {
  addBuildOptions(
    build.command('create').description('Create a build (queued; start it with build start)'),
  )
    .addOption(outputOption())
    .action(async (options: BuildFlags & { output: Format }) => {
      const created = await createBuild(session, await createBody(session, options));
      printRecords(
        options.output,
        created,
        () => `created build #${created.build_number}\n  id: ${created.id}`,
      );
    });

  addBuildOptions(
    build
      .command('run')
      .description(
        'Create a build, start it and follow its log; exits 0 success, 1 failed, 2 cancelled, 3 refused',
      ),
  )
    .option('--timestamps', 'prefix each log line with its time')
    .action(async (options: BuildFlags & { timestamps?: boolean }) => {
      await runBuild(session, await createBody(session, options), {
        timestamps: options.timestamps === true,
      });
    });
}

/** `build start`, `retry`, `cancel` and `delete`. */
function registerActions(build: Command, session: Session) {
  const act = (name: 'start' | 'retry', description: string) =>
    build
      .command(`${name} <build>`)
      .description(description)
      .addOption(outputOption())
      .action(async (id: string, options: { output: Format }) => {
        const answer = await unwrap(
          session.client().POST(`/api/v1/builds/{id}/${name}`, {
            params: { path: { id }, header: await session.tenantHeader() },
          }),
        );
        printRecords(
          options.output,
          answer,
          () => `build #${answer.build_number} (${answer.id}) is ${answer.status}`,
        );
      });
  act('start', 'Start a queued build');
  act('retry', 'Retry a failed build: a new queued build with the same configuration');

  build
    .command('cancel <build>')
    .description('Cancel a running build')
    .option('--reason <text>', 'why')
    .addOption(outputOption())
    .action(async (id: string, options: { reason?: string; output: Format }) => {
      const answer = await unwrap(
        session.client().POST('/api/v1/builds/{id}/cancel', {
          params: { path: { id }, header: await session.tenantHeader() },
          body: options.reason === undefined ? {} : { reason: options.reason },
        }),
      );
      printRecords(
        options.output,
        answer,
        () => `build #${answer.build_number} (${answer.id}) is ${answer.status}`,
      );
    });

  for (const [name, keep] of [
    ['keep', true],
    ['unkeep', false],
  ] as const) {
    build
      .command(`${name} <build>`)
      .description(
        keep
          ? 'Pin a build: the retention policy never deletes it (build:delete)'
          : 'Unpin a build: the retention policy may delete it again (build:delete)',
      )
      .addOption(outputOption())
      .action(async (id: string, options: { output: Format }) => {
        const params = { params: { path: { id }, header: await session.tenantHeader() } };
        const answer = await unwrap(
          keep
            ? session.client().PUT('/api/v1/builds/{id}/keep', params)
            : session.client().DELETE('/api/v1/builds/{id}/keep', params),
        );
        printRecords(
          options.output,
          answer,
          () =>
            `build #${answer.build_number} (${answer.id}) is ${answer.keep === true ? 'kept: retention never deletes it' : 'not kept: retention may delete it'}`,
        );
      });
  }

  build
    .command('delete <build>')
    .description('Delete a build that is not running, with its log')
    .action(async (id: string) => {
      await unwrap(
        session.client().DELETE('/api/v1/builds/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      note(`deleted build ${id}`);
    });
}

/** `build get`, `list` and `status`. */
function registerReads(build: Command, session: Session) {
  build
    .command('get <build>')
    .description('Every field of a build')
    .addOption(outputOption())
    .action(async (id: string, options: { output: Format }) => {
      const found = await unwrap(
        session.client().GET('/api/v1/builds/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, found, () => describe(found));
    });

  build
    .command('list')
    .description("The tenant's builds, newest first")
    .addOption(new Option('--status <status>', 'only builds in this status').choices(STATUSES))
    .option('-p, --project <project>', "only this project's builds (id or name)")
    .option('--page <n>', 'the page', positive, 1)
    .option('--limit <n>', 'builds a page (1-100)', positive, 20)
    .addOption(
      new Option('--sort-by <field>').choices(['created_at', 'updated_at', 'build_number']),
    )
    .addOption(new Option('--sort-order <order>').choices(['asc', 'desc']))
    .option('-w, --watch', 'print the list again whenever it changes (Ctrl-C ends)')
    .option('--interval <seconds>', 'with --watch: how often to look', positive, 2)
    .addOption(outputOption())
    .action(async (options: ListOptions) => {
      const projectId =
        options.project === undefined ? undefined : await projectIdOf(session, options.project);
      const query = {
        page: options.page,
        limit: options.limit,
        ...(options.status === undefined ? {} : { status: options.status }),
        ...(projectId === undefined ? {} : { project_id: projectId }),
        ...(options.sortBy === undefined ? {} : { sort_by: options.sortBy }),
        ...(options.sortOrder === undefined ? {} : { sort_order: options.sortOrder }),
      };
      const header = await session.tenantHeader();
      await watch(options.watch === true, options.interval, async () => {
        const answer = await unwrap(
          session.client().GET('/api/v1/builds', { params: { query, header } }),
        );
        return render(options.output, answer, () =>
          answer.builds.length === 0
            ? 'no builds'
            : `${table(
                ['ID', '#', 'STATUS', 'BRANCH', 'CREATED', 'COMPLETED'],
                answer.builds.map((b) => [
                  b.id,
                  String(b.build_number),
                  b.status,
                  b.git_branch ?? '',
                  when(b.created_at),
                  when(b.completed_at),
                ]),
              )}${answer.has_more ? `\n(more: --page ${answer.page + 1})` : ''}`,
        );
      });
    });

  build
    .command('status <build>')
    .description("A build's status and progress")
    .option('-w, --watch', 'print it again whenever it changes, until the build ends')
    .option('--interval <seconds>', 'with --watch: how often to look', positive, 2)
    .addOption(outputOption())
    .action(async (id: string, options: { watch?: boolean; interval: number; output: Format }) => {
      const header = await session.tenantHeader();
      let ended = false;
      await watch(
        options.watch === true,
        options.interval,
        async () => {
          const status = await unwrap(
            session
              .client()
              .GET('/api/v1/builds/{id}/status', { params: { path: { id }, header } }),
          );
          ended = status.status !== 'queued' && status.status !== 'in_progress';
          return render(options.output, status, () => describeStatus(status));
        },
        () => ended,
      );
    });
}

/**
 * Prints what `look` renders once, or with `watching` every `interval` seconds until `over()`,
 * whenever it differs from the last print (on a terminal, in place of it).
 */
async function watch(
  watching: boolean,
  interval: number,
  look: () => Promise<string>,
  over: () => boolean = () => false,
): Promise<void> {
  let last: string | undefined;
  for (;;) {
    const text = await look();
    if (text !== last) {
      if (watching && last !== undefined && process.stdout.isTTY === true) {
        process.stdout.write('\u001b[H\u001b[2J');
      }
      process.stdout.write(text);
      last = text;
    }
    if (!watching || over()) return;
    await new Promise((done) => setTimeout(done, interval * 1000));
  }
}

export function describe(build: Build): string {
  return fields([
    ['ID', build.id],
    ['Number', String(build.build_number)],
    ['Project', build.project_id],
    ['Status', build.status],
    ...(build.failure_reason === null || build.failure_reason === undefined
      ? []
      : ([['Reason', build.failure_reason]] as const)),
    ...(build.error_message === null || build.error_message === undefined
      ? []
      : ([['Error', build.error_message]] as const)),
    ...(build.queue === undefined ? [] : ([['Waiting', build.queue.message]] as const)),
    ['Branch', build.git_branch ?? '-'],
    ['Commit', build.git_commit ?? '-'],
    ['Created', when(build.created_at)],
    ['Started', when(build.started_at)],
    ['Completed', when(build.completed_at)],
    ['Digest', build.image_digest ?? '-'],
    ['Images', (build.images ?? []).join('\n' + ' '.repeat(11)) || '-'],
    ['Kept', build.keep === true ? 'yes: retention never deletes it' : 'no'],
  ]);
}

function describeStatus(status: BuildStatus): string {
  const progress =
    status.progress === null || status.progress === undefined
      ? '-'
      : `step ${status.progress.current_step}/${status.progress.total_steps} (${Math.round(status.progress.percentage)}%)`;
  return fields([
    ['Build', status.build_id],
    ['Status', status.status],
    ['Progress', progress],
    ...(status.queue === undefined ? [] : ([['Waiting', status.queue.message]] as const)),
    ['Started', when(status.started_at)],
    ['Estimated end', when(status.estimated_completion)],
    ...(status.error === null || status.error === undefined
      ? []
      : ([['Error', status.error]] as const)),
  ]);
}
