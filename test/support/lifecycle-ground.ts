import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { Admission } from '../../src/admission/admission.js';
import { AdmissionStore } from '../../src/admission/admission.repository.js';
import { type Env, loadConfig } from '../../src/config/config.js';
import type { LogSink } from '../../src/logs/log-sink.js';
import { specDigest } from '../../src/manifest/build-spec.js';
import { createDataSource } from '../../src/database/data-source.js';
import { BuildLifecycle } from '../../src/lifecycle/build-lifecycle.js';
import { BuildsRepository, type NewBuild } from '../../src/lifecycle/builds.repository.js';
import { LIFECYCLE_ENTITIES } from '../../src/lifecycle/lifecycle.module.js';
import { referenceSpec } from './build-specs.js';
import { createTestDatabase } from './database.js';
import { LogCapture } from './log-capture.js';

/**
 * The ground of the medium tests of lifecycle and the log store: a fresh migrated database with
 * only lifecycle's entities mapped, BuildLifecycle on it, one tenant and one project.
 */
export interface LifecycleGround {
  readonly dataSource: DataSource;
  readonly logger: Logger;
  readonly lifecycle: BuildLifecycle;
  readonly tenantId: string;
  readonly projectId: string;
  newProject(name: string): Promise<string>;
  /**
   * A reference-form build of the ground's project, on a branch of its own, its spec's source that
   * branch and commit and its digest computed as the API does (secret values as they are).
   */
  newBuild(overrides?: Partial<NewBuild>): NewBuild;
  /** Creates a queued build (newBuild) and answers its id. */
  createBuild(overrides?: Partial<NewBuild>): Promise<string>;
  /**
   * Admission on this database, its limits read from `env` as kiln reads them (default: no
   * installation limit), its `[kiln]` lines written to `sink`. Stopped with the ground.
   */
  admission(sink: Pick<LogSink, 'append'>, env?: Env): Admission;
  close(): Promise<void>;
}

export async function lifecycleGround(name: string): Promise<LifecycleGround> {
  const database = await createTestDatabase();
  const logger = new LogCapture().logger;
  const dataSource = createDataSource({ url: database.url, logger, entities: LIFECYCLE_ENTITIES });
  await dataSource.initialize();
  const lifecycle = new BuildLifecycle(new BuildsRepository(dataSource));
  const [{ id: tenantId }] = await dataSource.query<[{ id: string }]>(
    'INSERT INTO tenants (name) VALUES ($1) RETURNING id',
    [name],
  );
  const newProject = async (project: string): Promise<string> => {
    const [{ id }] = await dataSource.query<[{ id: string }]>(
      'INSERT INTO projects (tenant_id, name) VALUES ($1, $2) RETURNING id',
      [tenantId, project],
    );
    return id;
  };
  const projectId = await newProject(name);
  let branch = 0;
  const newBuild = (overrides: Partial<NewBuild> = {}): NewBuild => {
    const gitBranch =
      overrides.gitBranch !== undefined ? overrides.gitBranch : `${name}-${branch++}`;
    const gitCommit = overrides.gitCommit ?? null;
    // As the API makes one: the spec's source is the build's branch and commit.
    const spec =
      overrides.spec ??
      referenceSpec({
        source: { repository: null, branch: gitBranch, commit: gitCommit, context: '.' },
      });
    return {
      tenantId,
      projectId,
      gitBranch,
      gitCommit,
      method: null,
      config: { form: 'reference', build_args: null },
      spec,
      specDigest: specDigest(spec, (value) => value),
      ...overrides,
    };
  };
  const admissions: Admission[] = [];
  return {
    dataSource,
    logger,
    lifecycle,
    tenantId,
    projectId,
    newProject,
    newBuild,
    async createBuild(overrides) {
      return (await lifecycle.create(newBuild(overrides))).build.id;
    },
    admission(sink, env = { KILN_MAX_RUNNING: '100000' }) {
      const admission = new Admission(
        new AdmissionStore(dataSource),
        loadConfig({ KILN_RUNNER: 'local', ...env }),
        lifecycle,
        sink,
        logger,
      );
      admissions.push(admission);
      return admission;
    },
    async close() {
      for (const admission of admissions) admission.onApplicationShutdown();
      await dataSource.destroy();
      await database.drop();
    },
  };
}
