import fc from 'fast-check';
import { ConflictError } from '../src/common/errors.js';
import { type BuildStatus, isTerminal } from '../src/lifecycle/build-state.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** Builds created through POST /builds per run; retries add more on top. */
const MAX_CREATED = 4;

interface ModelBuild {
  readonly id: string;
  readonly branch: string;
  status: BuildStatus;
}

/** The spec's state table (section 3) over the builds of one run, in order of appearance. */
interface Model {
  readonly builds: ModelBuild[];
  created: number;
}

interface Real {
  readonly api: ApiClient;
  readonly runner: FakeRunner;
  readonly projectId: string;
  /** Every terminal status the API has shown, to prove it never changes afterwards. */
  readonly terminal: Map<string, BuildStatus>;
}

type BuildCommand = fc.AsyncCommand<Model, Real>;

async function expectConflict(response: Response, current: BuildStatus): Promise<void> {
  expect(response.status).toBe(409);
  expect(await jsonOf(response)).toMatchObject({ code: 'CONFLICT', details: { status: current } });
}

/** Every build of the run, read back over HTTP, has the model's status; terminals stay put. */
async function expectWorldMatches(model: Model, real: Real): Promise<void> {
  const actual = await Promise.all(
    model.builds.map(async (build) => {
      const response = await real.api.request('GET', `/builds/${build.id}`);
      expect(response.status).toBe(200);
      return ((await jsonOf(response)) as { status: BuildStatus }).status;
    }),
  );
  expect(actual).toEqual(model.builds.map((build) => build.status));
  model.builds.forEach((build, i) => {
    const status = actual[i]!;
    const reached = real.terminal.get(build.id);
    if (reached !== undefined) expect(status).toBe(reached);
    if (isTerminal(status)) real.terminal.set(build.id, status);
  });
}

class CreateCommand implements BuildCommand {
  check(model: Readonly<Model>): boolean {
    return model.created < MAX_CREATED;
  }

  async run(model: Model, real: Real): Promise<void> {
    const branch = `branch-${model.created}`;
    const response = await real.api.request('POST', '/builds', {
      project_id: real.projectId,
      git_branch: branch,
    });

    expect(response.status).toBe(201);
    const body = (await jsonOf(response)) as { id: string; status: BuildStatus };
    expect(body.status).toBe('queued');
    model.created += 1;
    model.builds.push({ id: body.id, branch, status: 'queued' });
    await expectWorldMatches(model, real);
  }

  toString(): string {
    return 'create';
  }
}

/** Which build an operation targets: `pick` modulo the candidates. */
interface Target {
  readonly pick: number;
  /** Prefer builds the operation is valid for, so runs reach deep states instead of mostly 409s. */
  readonly aim: boolean;
}

/**
 * An operation on one build of the run. The position it resolved to (0 = the run's first build,
 * in order of appearance, retries included) is what a counterexample prints.
 */
abstract class OnBuildCommand implements BuildCommand {
  protected position = -1;

  constructor(private readonly target: Target) {}

  check(model: Readonly<Model>): boolean {
    return model.builds.length > 0;
  }

  async run(model: Model, real: Real): Promise<void> {
    const all = model.builds.map((_, i) => i);
    const valid = all.filter((i) => model.builds[i]!.status === this.validFrom);
    const candidates = this.target.aim && valid.length > 0 ? valid : all;
    this.position = candidates[this.target.pick % candidates.length]!;
    await this.apply(model.builds[this.position]!, model, real);
    await expectWorldMatches(model, real);
  }

  /** The one status the spec lets this operation act on. */
  protected abstract readonly validFrom: BuildStatus;

  protected abstract apply(build: ModelBuild, model: Model, real: Real): Promise<void>;
}

/** An API transition: `validFrom` → `to` with 200, anything else 409 naming the current status. */
abstract class ApiTransitionCommand extends OnBuildCommand {
  protected abstract readonly action: 'start' | 'cancel';
  protected abstract readonly to: BuildStatus;

  protected async apply(build: ModelBuild, _model: Model, real: Real): Promise<void> {
    const response = await real.api.request('POST', `/builds/${build.id}/${this.action}`);
    if (build.status !== this.validFrom) {
      await expectConflict(response, build.status);
      return;
    }
    expect(response.status).toBe(200);
    expect(await jsonOf(response)).toMatchObject({ id: build.id, status: this.to });
    build.status = this.to;
  }

  override toString(): string {
    return `${this.action}(#${this.position})`;
  }
}

class StartCommand extends ApiTransitionCommand {
  protected readonly action = 'start';
  protected override readonly validFrom = 'queued';
  protected readonly to = 'in_progress';
}

class CancelCommand extends ApiTransitionCommand {
  protected readonly action = 'cancel';
  protected override readonly validFrom = 'in_progress';
  protected readonly to = 'cancelled';
}

/**
 * failed → the original stays failed and a new queued build appears. Spec section 3 is silent on a
 * retry while an earlier build of the same configuration is still queued or running; kiln applies
 * create's duplicate rule (4.3, 409 naming that build), and so does the model, so that a change
 * either way shows up here. The model's builds differ only by branch, so "same branch" is "same
 * configuration" here.
 */
class RetryCommand extends OnBuildCommand {
  protected override readonly validFrom = 'failed';

  protected async apply(build: ModelBuild, model: Model, real: Real): Promise<void> {
    const response = await real.api.request('POST', `/builds/${build.id}/retry`);
    if (build.status !== this.validFrom) {
      await expectConflict(response, build.status);
      return;
    }
    const active = model.builds.find(
      (b) => b.branch === build.branch && (b.status === 'queued' || b.status === 'in_progress'),
    );
    if (active !== undefined) {
      expect(response.status).toBe(409);
      expect(await jsonOf(response)).toMatchObject({
        code: 'CONFLICT',
        details: { build_id: active.id },
      });
      return;
    }
    expect(response.status).toBe(200);
    const body = (await jsonOf(response)) as { id: string; status: BuildStatus };
    expect(body.status).toBe('queued');
    expect(model.builds.map((b) => b.id)).not.toContain(body.id);
    model.builds.push({ id: body.id, branch: build.branch, status: 'queued' });
  }

  override toString(): string {
    return `retry(#${this.position})`;
  }
}

/** A runner outcome: in_progress → `to`, otherwise BuildLifecycle refuses with CONFLICT. */
class RunnerOutcomeCommand extends OnBuildCommand {
  constructor(
    target: Target,
    private readonly outcome: 'succeed' | 'fail',
  ) {
    super(target);
  }

  protected override readonly validFrom = 'in_progress';

  protected async apply(build: ModelBuild, _model: Model, real: Real): Promise<void> {
    const reported = real.runner[this.outcome](build.id);
    if (build.status !== this.validFrom) {
      await expect(reported).rejects.toBeInstanceOf(ConflictError);
      await expect(reported).rejects.toMatchObject({ details: { status: build.status } });
      return;
    }
    const to = this.outcome === 'succeed' ? 'success' : 'failed';
    expect((await reported).status).toBe(to);
    build.status = to;
  }

  override toString(): string {
    return `runner-${this.outcome}(#${this.position})`;
  }
}

describe('build state machine (model-based)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let api: ApiClient;
  let runner: FakeRunner;
  let projects: ProjectsService;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    api = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    projects = kiln.app.get(ProjectsService);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it("keeps every build's status equal to the spec model over random operation sequences", async () => {
    const target = fc.record({ pick: fc.nat({ max: 11 }), aim: fc.boolean() });
    const commands = fc.commands<Model, Real, false>(
      [
        fc.constant(new CreateCommand()),
        target.map((t) => new StartCommand(t)),
        target.map((t) => new CancelCommand(t)),
        target.map((t) => new RetryCommand(t)),
        target.map((t) => new RunnerOutcomeCommand(t, 'succeed')),
        target.map((t) => new RunnerOutcomeCommand(t, 'fail')),
      ],
      { maxCommands: 25, size: 'max' },
    );
    let runs = 0;

    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        runs += 1;
        // A fresh project per run: builds (and branch names) of one run never meet another's.
        const project = await projects.create(seeded.tenantA, `model-${runs}`);
        await fc.asyncModelRun(
          () => ({
            model: { builds: [], created: 0 },
            real: { api, runner, projectId: project.id, terminal: new Map() },
          }),
          cmds,
        );
      }),
      { numRuns: 40 },
    );
    // 40 sequences of real HTTP calls: ~15 s on 2 idle cores, more when other suites load them.
  }, 120_000);
});
