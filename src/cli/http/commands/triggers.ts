import { type Command, InvalidArgumentError, Option } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import { UsageError } from '../exit-codes.js';
import { manifestFromFile } from '../manifest.js';
import { fields, note, outputOption, printRecords, table, type Format, when } from '../output.js';
import type { Session } from '../session.js';
import { collect, keyValues, projectIdOf, wholeNumber } from './common.js';

type Trigger = Schemas['TriggerResponse'];
type WithSecret = Schemas['TriggerWithSecretResponse'];
type Delivery = Schemas['DeliveryResponse'];
type CreateBody = Schemas['CreateTriggerDto'];
type UpdateBody = Schemas['UpdateTriggerDto'];
type Provider = CreateBody['provider'];
type Event = NonNullable<CreateBody['events']>[number];
type Concurrency = NonNullable<CreateBody['concurrency']>;

const PROVIDERS = ['github', 'gitlab', 'gitea', 'forgejo'] as const satisfies Provider[];
const EVENTS = ['push', 'tag', 'pull_request'] as const satisfies Event[];
const CONCURRENCY = ['parallel', 'serial', 'latest-only'] as const satisfies Concurrency[];

/** The flags of `trigger create` and `trigger update`; update also has the --no-… ones. */
interface TriggerFlags {
  name?: string;
  provider?: Provider;
  event?: Event[];
  branch?: string[];
  tag?: string[];
  path?: string[];
  buildArg?: string[];
  manifest?: string;
  /** --start / --no-start; create has only --no-start, which makes this true by default. */
  start?: boolean;
  concurrency?: Concurrency;
  /** Seconds; false: --no-poll. */
  poll?: number | false;
  statusApi?: string;
  statusRepo?: string;
  statusToken?: string;
  statusContext?: string;
  /** --no-status (update): false. Commander makes a lone --no-… true by default. */
  status?: boolean;
  enabled?: boolean;
  disabled?: boolean;
  output: Format;
}

/** `kiln trigger …`: a project's build triggers and their deliveries (trigger:manage). */
export function registerTriggers(program: Command, session: Session) {
  const trigger = program
    .command('trigger')
    .description(
      "Build on push: a project's triggers, their webhook secrets and deliveries (trigger:manage; docs/build-on-push.md)",
    );
  registerReads(trigger, session);
  registerChanges(trigger, session);
  registerSecret(trigger, session);
}

/** `trigger list`, `show` and `deliveries`. */
function registerReads(trigger: Command, session: Session) {
  trigger
    .command('list')
    .description("A project's triggers (never their secrets)")
    .requiredOption('-p, --project <project>', 'the project (id or name)')
    .addOption(outputOption())
    .action(async (options: { project: string; output: Format }) => {
      const id = await projectIdOf(session, options.project);
      const answer = await unwrap(
        session.client().GET('/api/v1/projects/{id}/triggers', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, answer, () =>
        answer.triggers.length === 0
          ? `project ${options.project} has no trigger`
          : table(
              ['ID', 'NAME', 'PROVIDER', 'EVENTS', 'BRANCHES', 'CONCURRENCY', 'POLL', 'ENABLED'],
              answer.triggers.map((t) => [
                t.id,
                t.name,
                t.provider,
                t.events.join(','),
                t.branches.join(','),
                t.concurrency,
                t.poll_interval_seconds === null ? '-' : `${t.poll_interval_seconds}s`,
                t.enabled ? 'yes' : 'no',
              ]),
            ),
      );
    });

  trigger
    .command('show <trigger>')
    .description('One trigger (by id): its filters, what it builds, its webhook URL, its last poll')
    .addOption(outputOption())
    .action(async (id: string, options: { output: Format }) => {
      const found = await unwrap(
        session.client().GET('/api/v1/triggers/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, found, () => describe(found));
    });

  trigger
    .command('deliveries <trigger>')
    .description(
      "A trigger's newest 100 deliveries (webhooks and polled changes), newest first, with what came of each",
    )
    .addOption(outputOption())
    .action(async (id: string, options: { output: Format }) => {
      const answer = await unwrap(
        session.client().GET('/api/v1/triggers/{id}/deliveries', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, answer, () =>
        answer.deliveries.length === 0 ? 'no delivery yet' : deliveryTable(answer.deliveries),
      );
    });
}

/** `trigger create`, `update` and `delete`. */
function registerChanges(trigger: Command, session: Session) {
  addTriggerOptions(
    trigger
      .command('create')
      .description(
        'Create a trigger; its webhook secret is printed this once, with the URL to paste it beside',
      )
      .requiredOption('-p, --project <project>', 'the project (id or name)')
      .requiredOption('--name <name>', 'unique in the project')
      .addOption(
        new Option('--provider <provider>', 'who sends the webhooks')
          .choices(PROVIDERS)
          .makeOptionMandatory(),
      ),
    'create',
  ).action(
    async (options: TriggerFlags & { project: string; name: string; provider: Provider }) => {
      const projectId = await projectIdOf(session, options.project);
      const body: CreateBody = {
        name: options.name,
        provider: options.provider,
        ...(await changes(options)),
        // A lone --no-start leaves start true when it is not given: send only a refusal.
        ...(options.start === false ? { start: false } : {}),
      };
      const created = await unwrap(
        session.client().POST('/api/v1/projects/{id}/triggers', {
          params: { path: { id: projectId }, header: await session.tenantHeader() },
          body,
        }),
      );
      printRecords(options.output, created, () => {
        note(`created trigger ${created.name} (${created.id}) in project ${options.project}`);
        return withSecret(created);
      });
    },
  );

  addTriggerOptions(
    trigger
      .command('update <trigger>')
      .description('Change a trigger: what is given changes (a list given replaces the list)')
      .option('--name <name>', 'a new name')
      .addOption(new Option('--provider <provider>', 'a new provider').choices(PROVIDERS)),
    'update',
  ).action(async (id: string, options: TriggerFlags) => {
    const header = await session.tenantHeader();
    const body: UpdateBody = {
      ...(options.name === undefined ? {} : { name: options.name }),
      ...(options.provider === undefined ? {} : { provider: options.provider }),
      ...(await changes(options, async () =>
        unwrap(session.client().GET('/api/v1/triggers/{id}', { params: { path: { id }, header } })),
      )),
      ...(options.start === undefined ? {} : { start: options.start }),
      ...(options.poll === false ? { poll_interval_seconds: null } : {}),
      ...(options.status === false ? { status: null } : {}),
    };
    if (Object.keys(body).length === 0) {
      throw new UsageError('nothing to change: see kiln trigger update --help');
    }
    const changed = await unwrap(
      session.client().PATCH('/api/v1/triggers/{id}', {
        params: { path: { id }, header },
        body,
      }),
    );
    printRecords(options.output, changed, () => describe(changed));
  });

  trigger
    .command('delete <trigger>')
    .description('Delete a trigger and its deliveries; the builds it made stay')
    .action(async (id: string) => {
      await unwrap(
        session.client().DELETE('/api/v1/triggers/{id}', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      note(`deleted trigger ${id}`);
    });
}

/** `trigger rotate-secret`. */
function registerSecret(trigger: Command, session: Session) {
  trigger
    .command('rotate-secret <trigger>')
    .description(
      'A new webhook secret, printed this once; deliveries signed with the old one are refused from now on',
    )
    .addOption(outputOption())
    .action(async (id: string, options: { output: Format }) => {
      const rotated = await unwrap(
        session.client().POST('/api/v1/triggers/{id}/secret', {
          params: { path: { id }, header: await session.tenantHeader() },
        }),
      );
      printRecords(options.output, rotated, () => {
        note(
          `rotated the secret of trigger ${rotated.name} (${rotated.id}); the old one is refused`,
        );
        return withSecret(rotated);
      });
    });
}

/** What create and update share; update adds the flags that take a setting away. */
function addTriggerOptions(command: Command, mode: 'create' | 'update'): Command {
  // A list given on update replaces the trigger's; on create, kiln's default stands in for none.
  const list = (fallback: string) =>
    mode === 'create' ? `(repeat; default ${fallback})` : '(repeat; replaces the list)';
  command
    .addOption(
      new Option('--event <event>', `an event that builds ${list('push')}`)
        .choices(EVENTS)
        .argParser(collectChoice(EVENTS)),
    )
    .option('--branch <glob>', `a branch name pattern: main, release/* ${list('**')}`, collect)
    .option('--tag <glob>', `a tag name pattern: v* ${list('**')}`, collect)
    .option('--path <glob>', `a changed-file pattern: services/** ${list('any file')}`, collect)
    .option(
      '--build-arg <KEY=value>',
      'what to build: the reference form, with this build argument (repeat)',
      collect,
    )
    .option(
      '--manifest <file|->',
      'what to build: this manifest (JSON or YAML, as build create -f takes it)',
    )
    .addOption(
      new Option(
        '--concurrency <rule>',
        `how builds of one branch run together${mode === 'create' ? ' (default parallel)' : ''}`,
      ).choices(CONCURRENCY),
    )
    .option(
      '--poll <seconds>',
      "also poll the project's repository this often (60-86400)",
      wholeNumber,
    )
    .option(
      '--status-api <url>',
      "post commit statuses to this git host's API: https://api.github.com",
    )
    .option(
      '--status-repo <repo>',
      'the repository statuses go to: owner/repo (GitLab: group/project or its id)',
    )
    .option(
      '--status-token <reference>',
      'a secret reference to the API token (vault:…, aws:…, azure:…), never the token',
    )
    .option('--status-context <context>', 'the status name on the commit (default kiln)');
  if (mode === 'create') {
    command
      .option('--no-start', 'leave the builds queued for a person to start')
      .option('--disabled', 'create it switched off: deliveries are refused until it is enabled');
  } else {
    command
      .option('--start', 'start builds at once')
      .option('--no-start', 'leave the builds queued for a person to start')
      .option('--no-poll', 'stop polling')
      .option('--no-status', 'stop posting commit statuses')
      .option('--enabled', 'switch it on')
      .option('--disabled', 'switch it off: deliveries are refused');
  }
  return command.addOption(outputOption());
}

/** A repeated option limited to `choices`, collected into a list. */
function collectChoice<T extends string>(choices: readonly T[]) {
  return (value: string, previous: T[] = []): T[] => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`Allowed choices are ${choices.join(', ')}.`);
    }
    return [...previous, value as T];
  };
}

/**
 * The body fields the flags set, apart from name, provider and start. `current` reads the trigger
 * when some of --status-… are given without the others (update): the rest are its own.
 */
async function changes(
  options: TriggerFlags,
  current?: () => Promise<Trigger>,
): Promise<Omit<UpdateBody, 'name' | 'provider' | 'start'>> {
  if (options.enabled === true && options.disabled === true) {
    throw new UsageError('--enabled or --disabled, not both');
  }
  const build = await buildOf(options);
  const status = await statusOf(options, current);
  const enabled = options.disabled === true ? false : options.enabled === true ? true : undefined;
  return {
    ...(options.event === undefined ? {} : { events: options.event }),
    ...(options.branch === undefined ? {} : { branches: options.branch }),
    ...(options.tag === undefined ? {} : { tags: options.tag }),
    ...(options.path === undefined ? {} : { paths: options.path }),
    ...(build === undefined ? {} : { build }),
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
    ...(typeof options.poll === 'number' ? { poll_interval_seconds: options.poll } : {}),
    ...(status === undefined ? {} : { status }),
    ...(enabled === undefined ? {} : { enabled }),
  };
}

async function buildOf(options: TriggerFlags): Promise<Schemas['TriggerBuildDto'] | undefined> {
  if (options.manifest !== undefined) {
    if (options.buildArg !== undefined) {
      throw new UsageError('--build-arg is for the reference form, not with --manifest');
    }
    return { form: 'manifest', manifest: (await manifestFromFile(options.manifest)).manifest };
  }
  if (options.buildArg === undefined) return undefined;
  return { form: 'reference', build_args: keyValues(options.buildArg, '--build-arg') };
}

const STATUS_FLAGS = [
  ['statusApi', '--status-api'],
  ['statusRepo', '--status-repo'],
  ['statusToken', '--status-token'],
] as const;

async function statusOf(
  options: TriggerFlags,
  current: (() => Promise<Trigger>) | undefined,
): Promise<Schemas['StatusTargetDto'] | undefined> {
  const given = [...STATUS_FLAGS.map(([key]) => options[key]), options.statusContext];
  if (given.every((value) => value === undefined)) return undefined;
  if (options.status === false) {
    throw new UsageError('--no-status takes no --status-… option');
  }
  const missing = STATUS_FLAGS.filter(([key]) => options[key] === undefined);
  const base = missing.length === 0 || current === undefined ? null : (await current()).status;
  const api = options.statusApi ?? base?.api_url;
  const repository = options.statusRepo ?? base?.repository;
  const token = options.statusToken ?? base?.token;
  if (api === undefined || repository === undefined || token === undefined) {
    throw new UsageError(
      `commit statuses need --status-api, --status-repo and --status-token (missing: ${missing.map(([, flag]) => flag).join(', ')})`,
    );
  }
  const context = options.statusContext ?? base?.context;
  return {
    api_url: api,
    repository,
    token,
    ...(context === undefined ? {} : { context }),
  };
}

/** A created trigger, or one whose secret was rotated: its secret and where to paste it. */
function withSecret(trigger: WithSecret): string {
  note(
    'the secret is shown only now: kiln keeps it sealed and never shows it again ' +
      `(lost it? kiln trigger rotate-secret ${trigger.id})`,
  );
  return fields([
    ['Webhook URL', trigger.webhook_url],
    ['Secret', trigger.secret],
  ]);
}

function describe(trigger: Trigger): string {
  const { status } = trigger;
  return fields([
    ['ID', trigger.id],
    ['Name', trigger.name],
    ['Project', trigger.project_id],
    ['Provider', trigger.provider],
    ['Enabled', trigger.enabled ? 'yes' : 'no'],
    ['Webhook URL', trigger.webhook_url],
    ['Events', trigger.events.join(', ')],
    ['Branches', trigger.branches.join(', ')],
    ['Tags', trigger.tags.join(', ')],
    ['Paths', trigger.paths.length === 0 ? 'any' : trigger.paths.join(', ')],
    ['Builds', builds(trigger.build)],
    ['Start', trigger.start ? 'at once' : 'queued, for a person to start'],
    ['Concurrency', trigger.concurrency],
    [
      'Polling',
      trigger.poll_interval_seconds === null
        ? 'off'
        : `every ${trigger.poll_interval_seconds} s${trigger.poll_error === null ? '' : ` (last poll failed: ${trigger.poll_error})`}`,
    ],
    [
      'Statuses',
      status === null
        ? 'not posted'
        : `${status.context} on ${status.repository} at ${status.api_url}, token ${status.token}`,
    ],
    ['Created', when(trigger.created_at)],
    ['Updated', when(trigger.updated_at)],
  ]);
}

function builds(build: Trigger['build']): string {
  if (build.form === 'manifest') return 'the manifest (-o yaml shows it)';
  const args = Object.entries(build.build_args ?? {}).map(([key, value]) => `${key}=${value}`);
  return args.length === 0 ? 'the reference form' : `the reference form, ${args.join(' ')}`;
}

function deliveryTable(deliveries: readonly Delivery[]): string {
  return table(
    ['RECEIVED', 'EVENT', 'REF', 'COMMIT', 'PUSHER', 'OUTCOME', 'BUILD', 'DETAIL'],
    deliveries.map((d) => [
      when(d.received_at),
      d.event,
      d.ref ?? '-',
      d.commit === null ? '-' : d.commit.slice(0, 12),
      d.pusher ?? '-',
      d.outcome,
      d.build_id ?? '-',
      d.detail ?? '',
    ]),
  );
}
