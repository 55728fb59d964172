import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { SPDX } from '../../../test/support/artifact-documents.js';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from '../../../test/support/auth.js';
import { referenceSpec } from '../../../test/support/build-specs.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.js';
import { type ChildScript, FakeProcesses } from '../../../test/support/fake-processes.js';
import { LogCapture } from '../../../test/support/log-capture.js';
import { KILN_ENTITIES } from '../../app.entities.js';
import { AppModule } from '../../app.module.js';
import { BuildArtifacts } from '../../artifacts/build-artifacts.js';
import { loadConfig } from '../../config/config.js';
import { createDataSource } from '../../database/data-source.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import { BuildLogsRepository } from '../../logs/build-logs.repository.js';
import type { BuildSpec } from '../../manifest/build-spec.js';
import { BuildRunner } from '../build-runner.js';
import type { BuildRun } from './build-run.js';
import { LocalRunner } from './local.runner.js';
import type { ChildStart } from './processes.js';
import { Processes } from './processes.js';

const REPOSITORY = 'registry.test/kiln/web';
const DIGEST = `sha256:${'ab'.repeat(32)}`;
const GRACE_MS = 1_000;

/** A kiln of the api role on a real database whose local runner starts children through `processes`. */
interface Ground {
  readonly app: INestApplication;
  readonly runner: BuildRunner;
  readonly lifecycle: BuildLifecycle;
  readonly dataDir: string;
  readonly logs: LogCapture;
  close(): Promise<void>;
}

async function startKiln(
  database: TestDatabase,
  dataSource: DataSource,
  processes: FakeProcesses,
  dataDir = mkdtempSync(join(tmpdir(), 'kiln-runner-')),
): Promise<Ground> {
  const config = loadConfig(
    {
      KILN_JWT_SECRET: TEST_JWT_SECRET,
      KILN_SECRETS_KEY: TEST_SECRETS_KEY,
      KILN_ROLE: 'api',
      KILN_RUNNER: 'local',
      KILN_DATA_DIR: dataDir,
      KILN_CANCEL_GRACE_SECONDS: String(GRACE_MS / 1000),
      DATABASE_URL: database.url,
    },
    dataDir,
  );
  const logs = new LogCapture();
  const module = await Test.createTestingModule({
    imports: [AppModule.forRoot(config, dataSource, logs.logger)],
  })
    .overrideProvider(Processes)
    .useValue(processes)
    .compile();
  // The api role's log WebSocket needs an HTTP server (never listening here).
  const app = module.createNestApplication({ logger: false });
  await app.init();
  return {
    app,
    runner: app.get(BuildRunner),
    lifecycle: app.get(BuildLifecycle),
    dataDir,
    logs,
    async close() {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** What buildah does: `bud` prints its steps; `push` writes the digest file it is given. */
function buildah(overrides: { bud?: ChildScript; push?: ChildScript } = {}) {
  return (child: ChildStart): ChildScript => {
    if (child.args.includes('bud')) {
      return overrides.bud ?? { lines: ['STEP 1/1: FROM scratch', 'COMMIT'] };
    }
    if (child.args.includes('push')) {
      const digestFile = child.args[child.args.indexOf('--digestfile') + 1];
      return (
        overrides.push ?? {
          lines: ['Writing manifest to image destination'],
          effect: async () => {
            if (digestFile !== undefined) await writeFile(digestFile, DIGEST);
          },
        }
      );
    }
    return {};
  };
}

/** Medium tests: LocalRunner and its executors on a real database, with a scripted process port. */
describe('LocalRunner with a scripted process port', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let processes: FakeProcesses;
  let kiln: Ground;
  let tenantId: string;
  let projectId: string;
  let branch = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = createDataSource({
      url: database.url,
      logger: new LogCapture().logger,
      entities: KILN_ENTITIES,
      poolSize: 4,
    });
    await dataSource.initialize();
    processes = new FakeProcesses();
    kiln = await startKiln(database, dataSource, processes);
    [{ id: tenantId }] = await dataSource.query<[{ id: string }]>(
      'INSERT INTO tenants (name) VALUES ($1) RETURNING id',
      ['runner'],
    );
    [{ id: projectId }] = await dataSource.query<[{ id: string }]>(
      'INSERT INTO projects (tenant_id, name) VALUES ($1, $2) RETURNING id',
      [tenantId, 'web'],
    );
  });

  afterAll(async () => {
    await kiln.close();
    await dataSource.destroy();
    await database.drop();
  });

  /** An inline-Dockerfile build pushed to REPOSITORY:v1, moved to in_progress and started. */
  async function startBuild(spec: Partial<BuildSpec> = {}): Promise<BuildEntity> {
    const full = referenceSpec({
      config: { dockerfile: 'FROM scratch\n' },
      output: { repository: REPOSITORY, tags: ['v1'], registryType: null },
      ...spec,
    });
    const gitBranch = `b${branch++}`;
    const { build } = await kiln.lifecycle.create({
      tenantId,
      projectId,
      gitBranch,
      gitCommit: null,
      method: full.method,
      config: { form: 'reference', build_args: null },
      spec: full,
      specDigest: null,
    });
    const started = await kiln.lifecycle.start(tenantId, build.id);
    await kiln.runner.start(started);
    return started;
  }

  async function ended(id: string): Promise<BuildEntity> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const build = await kiln.lifecycle.find(id);
      if (build !== undefined && !['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} is still ${build?.status}`);
      await new Promise((done) => setTimeout(done, 50));
    }
  }

  async function messages(id: string): Promise<string[]> {
    const rows = await dataSource.query<Array<{ message: string }>>(
      'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    return rows.map((row) => row.message);
  }

  async function whenRunning(container: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!processes.running.some((child) => child.start.container === container)) {
      if (Date.now() > deadline) throw new Error(`no ${container} child started`);
      await new Promise((done) => setTimeout(done, 20));
    }
  }

  const storage = (id: string) => join(kiln.dataDir, 'builds', id, 'storage');

  it('succeeds a Dockerfile build, recording the image by the digest buildah wrote and its lines', async () => {
    processes.script = buildah();

    const build = await ended((await startBuild()).id);

    expect(build).toMatchObject({
      status: 'success',
      imageDigest: DIGEST,
      images: [`${REPOSITORY}:v1@${DIGEST}`],
    });
    expect(await messages(build.id)).toEqual(
      expect.arrayContaining([
        'STEP 1/1: FROM scratch',
        'Writing manifest to image destination',
        `[kiln] pushed ${REPOSITORY}:v1`,
      ]),
    );
    expect(processes.workingContainers).not.toContain(storage(build.id));
  });

  it("fails a build whose builder exits non-zero with the builder's error line, and cleans up", async () => {
    const error = 'Error: building at STEP "RUN false": exit status 1';
    processes.script = buildah({ bud: { lines: ['STEP 1/2: FROM scratch', error], code: 1 } });

    const build = await ended((await startBuild()).id);

    expect(build).toMatchObject({
      status: 'failed',
      failureReason: 'BuildFailed',
      errorMessage: error,
    });
    expect(existsSync(join(kiln.dataDir, 'builds', build.id, 'source'))).toBe(false);
    expect(processes.workingContainers).not.toContain(storage(build.id));
  });

  it('fails a build whose builder printed past the output limit, saying so', async () => {
    processes.script = buildah({
      bud: { lines: ['STEP 1/1: FROM scratch'], outputLimitReached: true },
    });

    const build = await ended((await startBuild()).id);

    expect(build).toMatchObject({ status: 'failed', failureReason: 'BuildFailed' });
    expect(build.errorMessage).toMatch(
      /^buildah printed more than \d+ bytes of output, so kiln stopped the build/,
    );
  });

  it('stops a builder that outlives the timeout with the cancel grace and fails the build as TimedOut', async () => {
    processes.script = buildah({ bud: { lines: ['STEP 1/2: FROM scratch'], hang: true } });

    const build = await ended((await startBuild({ timeoutSeconds: 1 })).id);

    expect(build).toMatchObject({ status: 'failed', failureReason: 'TimedOut' });
    expect(build.errorMessage).toContain('longer than its timeout of 1 s');
    const builder = processes.children.find(
      (child) => child.start.args.includes('bud') && child.start.buildDir.endsWith(build.id),
    );
    expect(builder).toMatchObject({ running: false, stoppedWithGraceMs: GRACE_MS });
    expect(processes.workingContainers).not.toContain(storage(build.id));
  });

  it('cancel stops the running builder and returns once the build is cleaned up', async () => {
    processes.script = buildah({ bud: { lines: ['STEP 1/2: FROM scratch'], hang: true } });
    const started = await startBuild();
    await whenRunning('build');

    const cancelled = await kiln.lifecycle.cancel(tenantId, started.id, null);
    await kiln.runner.cancel(cancelled);

    expect(processes.running).toEqual([]);
    expect(processes.workingContainers).not.toContain(storage(started.id));
    expect(existsSync(join(kiln.dataDir, 'builds', started.id, 'source'))).toBe(false);
    expect(await kiln.lifecycle.find(started.id)).toMatchObject({ status: 'cancelled' });
    expect(await messages(started.id)).toContain('[kiln] cancelled; the build was stopped');
  });

  it('stores the SBOM the step CLI wrote for the pushed digest', async () => {
    const build = buildah();
    processes.installed.add('syft');
    processes.script = (child) =>
      child.container === 'sbom'
        ? {
            effect: () =>
              writeFile(join(child.buildDir, 'steps', 'sbom.json'), JSON.stringify(SPDX)),
          }
        : build(child);

    const done = await ended((await startBuild({ sbomTool: 'syft' })).id);

    expect(done).toMatchObject({ status: 'success' });
    expect(await messages(done.id)).toContain(
      `[kiln] the SBOM step runs syft against ${REPOSITORY}@${DIGEST}`,
    );
    const sbom = await kiln.app.get(BuildArtifacts).sbom(tenantId, done.id);
    expect(sbom).toMatchObject({ tool: 'syft', document: SPDX });
  });

  it('skips a step whose CLI is not on PATH, saying so, and still succeeds', async () => {
    processes.installed.delete('syft');
    processes.script = buildah();

    const build = await ended((await startBuild({ sbomTool: 'syft' })).id);

    expect(build).toMatchObject({ status: 'success' });
    expect(await messages(build.id)).toContain(
      '[kiln] the SBOM step is skipped: syft is not installed on this machine (kiln looked on PATH)',
    );
  });

  it('fails a paketo build on a machine without pack before any child runs, naming the CLI', async () => {
    processes.installed.delete('pack');
    const paketo = { paketo_config: { builder: 'paketobuildpacks/builder-jammy-base' } };

    const build = await ended((await startBuild({ method: 'paketo', config: paketo })).id);

    expect(build).toMatchObject({ status: 'failed', failureReason: 'InvalidSpec' });
    expect(build.errorMessage).toContain('paketo builds need the `pack` CLI');
    expect(processes.children.filter((child) => child.start.buildDir.endsWith(build.id))).toEqual(
      [],
    );
  });

  it('publishes a paketo build with pack and skips the steps, which need a digest pack does not give', async () => {
    processes.installed.add('pack');
    processes.script = () => ({ lines: ['===> EXPORTING', 'Successfully built image'] });
    const paketo = { paketo_config: { builder: 'paketobuildpacks/builder-jammy-base' } };

    const build = await ended(
      (await startBuild({ method: 'paketo', config: paketo, sbomTool: 'syft' })).id,
    );

    expect(build).toMatchObject({ status: 'success', images: [] });
    expect(await messages(build.id)).toEqual(
      expect.arrayContaining([
        'Successfully built image',
        `[kiln] pushed ${REPOSITORY}:v1`,
        '[kiln] the SBOM (syft) step is skipped: it needs a pushed image, and kiln does not learn the digest of the image pack publishes',
      ]),
    );
  });

  it('fails a packer build whose template does not validate as InvalidSpec, with packer’s error', async () => {
    processes.installed.add('packer');
    processes.script = (child) =>
      child.args[0] === 'validate'
        ? { lines: ['Error: Unknown root level key: bulders'], code: 1 }
        : {};
    const packer = { packer_template: '{"bulders": []}' };

    const build = await ended((await startBuild({ method: 'packer', config: packer })).id);

    expect(build).toMatchObject({
      status: 'failed',
      failureReason: 'InvalidSpec',
      errorMessage: 'packer validate failed: Error: Unknown root level key: bulders',
    });
  });

  describe('a packer build’s manifest', () => {
    const MANIFEST = readFileSync(
      join(__dirname, '../../manifest/fixtures/packer-manifest-file.json'),
    );
    const BUILDERS = [{ type: 'null', communicator: 'none' }];
    let record: jest.SpiedFunction<(run: BuildRun, ...rest: unknown[]) => Promise<void>>;

    beforeEach(() => {
      processes.installed.add('packer');
      record = jest.spyOn(
        LocalRunner.prototype as unknown as {
          record: (run: BuildRun, ...rest: unknown[]) => Promise<void>;
        },
        'record',
      );
    });

    afterEach(() => record.mockRestore());

    /** What the run held for its provenance when its end was recorded. */
    const packerOf = (id: string) =>
      record.mock.calls.find(([run]) => run.build.id === id)?.[0].packer;

    /** `packer build` writes `manifest` where the template says, in its working directory. */
    const packerWriting = (file: string, manifest: Buffer | undefined) => (child: ChildStart) =>
      child.args[0] === 'build' && manifest !== undefined
        ? {
            lines: ['==> null: Running post-processor: manifest'],
            effect: async () => {
              await mkdir(join(child.cwd, file, '..'), { recursive: true });
              await writeFile(join(child.cwd, file), manifest);
            },
          }
        : {};

    async function packerBuild(postProcessors: unknown[]): Promise<BuildEntity> {
      const template = JSON.stringify({ builders: BUILDERS, 'post-processors': postProcessors });
      return ended(
        (await startBuild({ method: 'packer', config: { packer_template: template } })).id,
      );
    }

    it('keeps on the run what the manifest lists, for the record of its success', async () => {
      processes.script = packerWriting('out/manifest.json', MANIFEST);

      const build = await packerBuild([{ type: 'manifest', output: 'out/manifest.json' }]);

      expect(build.status).toBe('success');
      expect(packerOf(build.id)).toEqual({
        manifestDigest: 'sha256:adb0d52c6b041e40bd08ebd13193ede3bdfbd3c56f0ee7163d75af3cdaf96b97',
        artifacts: [
          { name: 'world', builderType: 'file', artifactId: 'File' },
          { name: 'hello', builderType: 'file', artifactId: 'File' },
        ],
      });
      expect(await messages(build.id)).toContain(
        "[kiln] packer's manifest out/manifest.json names 2 artifacts (sha256:adb0d52c6b041e40bd08ebd13193ede3bdfbd3c56f0ee7163d75af3cdaf96b97)",
      );
    });

    it('warns once, and succeeds, when packer wrote no manifest', async () => {
      processes.script = packerWriting('packer-manifest.json', undefined);

      const build = await packerBuild(['manifest']);

      expect(build.status).toBe('success');
      expect(packerOf(build.id)).toBeUndefined();
      const warning =
        "WARN: [kiln] could not read packer's manifest: packer wrote no packer-manifest.json; provenance names no artifacts";
      expect((await messages(build.id)).filter((line) => line === warning)).toHaveLength(1);
    });

    it('warns, and succeeds, when the manifest is no packer manifest', async () => {
      processes.script = packerWriting('packer-manifest.json', Buffer.from('not json'));

      const build = await packerBuild(['manifest']);

      expect(build.status).toBe('success');
      expect(await messages(build.id)).toContain(
        "WARN: [kiln] could not read packer's manifest: packer-manifest.json is not JSON; provenance names no artifacts",
      );
    });

    it('says once, after packer’s lines, that a template without a manifest post-processor names nothing', async () => {
      processes.script = (child) =>
        child.args[0] === 'build' ? { lines: ['==> Builds finished.'] } : {};

      const build = await packerBuild([]);
      const lines = await messages(build.id);
      const note =
        '[kiln] the template has no manifest post-processor; provenance names no artifacts';

      expect(build.status).toBe('success');
      expect(packerOf(build.id)).toBeUndefined();
      expect(lines.filter((line) => line === note)).toHaveLength(1);
      expect(lines.indexOf(note)).toBeGreaterThan(lines.indexOf('==> Builds finished.'));
    });
  });

  describe('a build from a repository', () => {
    const COMMIT = 'c0ffee42'.repeat(5);
    const source = {
      repository: 'https://git.test/kiln/web.git',
      branch: 'main',
      commit: null,
      context: '.',
    };
    type Record = (this: LocalRunner, run: BuildRun, ...rest: unknown[]) => Promise<void>;
    /** How many git children still ran when each build's outcome was recorded. */
    const gitAtRecord = new Map<string, number>();
    let record: jest.SpiedFunction<Record>;

    beforeEach(() => {
      const target = LocalRunner.prototype as unknown as { record: Record };
      const original = target.record;
      record = jest.spyOn(target, 'record').mockImplementation(function (
        this: LocalRunner,
        run,
        ...rest
      ) {
        const git = processes.running.filter((child) => child.start.command === 'git');
        gitAtRecord.set(run.build.id, git.length);
        return original.call(this, run, ...rest);
      });
    });

    afterEach(() => record.mockRestore());

    /** buildah as usual; `git log` (the commit read) as `read` says, told when bud and push ran. */
    function scripted(read: (buildah: { bud: Promise<void>; push: Promise<void> }) => ChildScript) {
      const base = buildah();
      let budStarted: () => void = () => undefined;
      let pushed: () => void = () => undefined;
      const bud = new Promise<void>((done) => (budStarted = done));
      const push = new Promise<void>((done) => (pushed = done));
      return (child: ChildStart): ChildScript => {
        if (child.command === 'git') return child.args[0] === 'log' ? read({ bud, push }) : {};
        if (child.args.includes('bud')) budStarted();
        const script = base(child);
        if (!child.args.includes('push')) return script;
        return {
          ...script,
          effect: async () => {
            await script.effect?.();
            pushed();
          },
        };
      };
    }

    it('starts the builder first, reads the commit beside it, and records the outcome once the commit is printed', async () => {
      processes.script = scripted(({ bud, push }) => ({
        lines: [`kiln: checked out ${COMMIT}`],
        // The read ends only after the builder started (a runner that waited for it never would
        // start it), and a while after the push, when a runner that did not wait would have
        // recorded the outcome already.
        effect: async () => {
          await bud;
          await push;
          await new Promise((done) => setTimeout(done, 300));
        },
      }));

      const build = await ended((await startBuild({ source })).id);

      expect(build).toMatchObject({ status: 'success', imageDigest: DIGEST });
      const started = processes.children
        .filter((child) => child.start.buildDir.endsWith(build.id))
        .map(({ start }) =>
          start.command === 'git'
            ? `git ${start.args[0]}`
            : start.args.includes('bud')
              ? 'bud'
              : '',
        );
      expect(started.filter((name) => name !== '').slice(0, 3)).toEqual([
        'git clone',
        'bud',
        'git log',
      ]);
      expect(gitAtRecord.get(build.id)).toBe(0);
      // What the provenance names as the source's commit.
      expect(await kiln.app.get(BuildLogsRepository).checkedOutCommit(build.id)).toBe(COMMIT);
    });

    it('fails the build as before when the commit read cannot run, though the builder ran', async () => {
      processes.script = scripted(() => ({
        effect: () => Promise.reject(new Error('spawn git ENOENT')),
      }));

      const build = await ended((await startBuild({ source })).id);

      expect(build).toMatchObject({ status: 'failed', failureReason: 'InternalError' });
      expect(build.errorMessage).toMatch(/^the local runner failed unexpectedly/);
      expect(
        processes.children.some(
          (child) => child.start.args.includes('bud') && child.start.buildDir.endsWith(build.id),
        ),
      ).toBe(true);
      expect(await kiln.app.get(BuildLogsRepository).checkedOutCommit(build.id)).toBeUndefined();
    });

    it('cancel stops the commit read as well as the builder', async () => {
      processes.script = scripted(() => ({ hang: true }));
      const base = processes.script;
      processes.script = (child) =>
        child.args.includes('bud')
          ? { lines: ['STEP 1/2: FROM scratch'], hang: true }
          : base(child);
      const started = await startBuild({ source });
      await whenRunning('build');

      const cancelled = await kiln.lifecycle.cancel(tenantId, started.id, null);
      await kiln.runner.cancel(cancelled);

      const mine = processes.children.filter((child) => child.start.buildDir.endsWith(started.id));
      expect(mine.map((child) => [child.start.args[0], child.stoppedWithGraceMs])).toEqual(
        expect.arrayContaining([
          ['log', GRACE_MS],
          [expect.any(String), GRACE_MS],
        ]),
      );
      expect(processes.running).toEqual([]);
      expect(await kiln.lifecycle.find(started.id)).toMatchObject({ status: 'cancelled' });
    });
  });

  it('after a restart, stops the groups a killed kiln left and fails the builds it ran', async () => {
    // As a kiln that was SIGKILLed leaves a build: in progress under its pid, its checkout there.
    const { build } = await kiln.lifecycle.create({
      tenantId,
      projectId,
      gitBranch: 'left-behind',
      gitCommit: null,
      method: 'kaniko',
      config: { form: 'reference', build_args: null },
      spec: referenceSpec(),
      specDigest: null,
    });
    await kiln.lifecycle.start(tenantId, build.id);
    await kiln.lifecycle.setRunnerRef(build.id, 'local:1');
    const dir = join(kiln.dataDir, 'builds', build.id);
    await mkdir(join(dir, 'source'), { recursive: true });
    const next = new FakeProcesses();
    next.orphans.set(dir, 2);

    const restarted = await startKiln(database, dataSource, next, kiln.dataDir);
    try {
      expect(await restarted.lifecycle.find(build.id)).toMatchObject({
        status: 'failed',
        failureReason: 'InternalError',
        errorMessage: 'kiln restarted while this build ran; retry it',
      });
      expect(existsSync(join(dir, 'source'))).toBe(false);
      expect(restarted.logs.find((line) => line['groups'] === 2)).toMatchObject({
        build_id: build.id,
        msg: 'stopped the processes of a build that a previous kiln process left running',
      });
    } finally {
      await restarted.app.close();
    }
  });
});
