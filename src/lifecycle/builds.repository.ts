import { Injectable, Optional } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { DEFAULT_LIST_EXACT_COUNT_LIMIT, KilnConfig } from '../config/config.js';
import { STATUS_CHANNEL } from '../database/channels.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { PushedImages } from '../manifest/formats.js';
import { type BuildConfigSnapshot, BuildEntity } from './build.entity.js';
import type { BuildStatus } from './build-state.js';
import type { FailureReason } from '../manifest/failure-reasons.js';

export interface NewBuild {
  readonly tenantId: string;
  readonly projectId: string;
  readonly gitBranch: string | null;
  readonly gitCommit: string | null;
  readonly gitAuthorName?: string | null;
  readonly gitAuthorEmail?: string | null;
  readonly method: string | null;
  readonly config: BuildConfigSnapshot;
  readonly spec: BuildSpec;
  /** specDigest of `spec`: the duplicate rule's key (null: not subject to it). */
  readonly specDigest: string | null;
  readonly retryOf?: string | null;
  readonly idempotencyKey?: string | null;
  readonly requestHash?: string | null;
  readonly createdBy?: string | null;
  /** Where a trigger's build came from (docs/adr/0053-triggers.md). */
  readonly trigger?: BuildTrigger | null;
}

/** The trigger, event and pusher a build made by a trigger records. */
export interface BuildTrigger {
  readonly id: string;
  readonly event: string;
  readonly pusher: string | null;
}

export const BUILD_SORT_KEYS = ['created_at', 'updated_at', 'build_number'] as const;
export type BuildSortKey = (typeof BUILD_SORT_KEYS)[number];

export interface BuildListQuery {
  readonly tenantId: string;
  readonly status?: BuildStatus;
  readonly projectId?: string;
  readonly sortBy: BuildSortKey;
  readonly sortOrder: 'asc' | 'desc';
  readonly offset: number;
  readonly limit: number;
}

/** One page of a build list. */
export interface BuildPage {
  readonly builds: BuildEntity[];
  /**
   * How many builds match. Exact while at most KILN_LIST_EXACT_COUNT_LIMIT do, and whenever this
   * page reaches the last one; past the limit the planner's estimate, never below the limit + 1.
   * Never contradicts the page: at least one more than the rows up to its end when hasMore.
   */
  readonly total: number;
  /** Exact: another build follows this page (one row was read past it). */
  readonly hasMore: boolean;
}

/** Columns a transition may set besides status. */
export interface TransitionChanges {
  readonly startedAt?: 'now' | null;
  /** The write's time, or when the build ended by another clock (clamped to started_at). */
  readonly completedAt?: 'now' | Date;
  readonly errorMessage?: string | null;
  readonly failureReason?: FailureReason | null;
  readonly cancelReason?: string | null;
  readonly runnerRef?: string | null;
  /** What the build pushed (image_digest, images). */
  readonly pushed?: PushedImages;
  /** The outcome of its provenance: `attached`, `stored-only` or `failed: …`. */
  readonly provenance?: string;
}

/** A transition that applied: the build as written, and how long it ran when it ended. */
export interface Transitioned {
  readonly build: BuildEntity;
  /**
   * Seconds from the build's admission (build_admissions.admitted_at, or started_at when it was
   * never admitted) to completed_at, by the database's clock; null unless the build ended.
   */
  readonly runSeconds: number | null;
}

export type InsertOutcome =
  | { kind: 'created'; build: BuildEntity }
  | { kind: 'project-missing' }
  | { kind: 'duplicate' }
  | { kind: 'active-retry' }
  | { kind: 'idempotency-clash' };

/** The constraint a unique (23505) or foreign-key (23503) violation names. */
function violatedConstraint(error: unknown): string | undefined {
  const driverError = (error as { driverError?: { code?: unknown; constraint?: unknown } })
    .driverError;
  return (driverError?.code === '23505' || driverError?.code === '23503') &&
    typeof driverError.constraint === 'string'
    ? driverError.constraint
    : undefined;
}

const SORT_COLUMNS: Readonly<Record<BuildSortKey, string>> = {
  created_at: 'b.created_at',
  updated_at: 'b.updated_at',
  build_number: 'b.build_number',
};

@Injectable()
export class BuildsRepository {
  private readonly builds: Repository<BuildEntity>;
  private readonly exactCountLimit: number;

  /** Without a KilnConfig (medium tests build the repository by hand) the default limit holds. */
  constructor(
    private readonly dataSource: DataSource,
    @Optional() config?: KilnConfig,
  ) {
    this.builds = dataSource.getRepository(BuildEntity);
    this.exactCountLimit = config?.listExactCountLimit ?? DEFAULT_LIST_EXACT_COUNT_LIMIT;
  }

  /**
   * Takes the project's next build number, then inserts the build. The number is taken in a
   * statement of its own, so the project's row is locked only while that statement runs and
   * concurrent creates in one project queue for no longer. A refused insert (duplicate,
   * idempotency clash, active retry) leaves its number unused for good: numbers are never reused
   * and may have gaps (docs/adr/0023-list-counts-and-build-numbers.md).
   */
  async insert(build: NewBuild): Promise<InsertOutcome> {
    const number = await this.allocateNumber(build.tenantId, build.projectId);
    if (number === undefined) return { kind: 'project-missing' };
    try {
      const saved = await this.builds.save(
        this.builds.create({
          tenantId: build.tenantId,
          projectId: build.projectId,
          buildNumber: number,
          status: 'queued',
          gitBranch: build.gitBranch,
          gitCommit: build.gitCommit,
          gitAuthorName: build.gitAuthorName ?? null,
          gitAuthorEmail: build.gitAuthorEmail ?? null,
          method: build.method,
          config: build.config,
          spec: build.spec,
          specDigest: build.specDigest,
          retryOf: build.retryOf ?? null,
          idempotencyKey: build.idempotencyKey ?? null,
          requestHash: build.requestHash ?? null,
          createdBy: build.createdBy ?? null,
          triggerId: build.trigger?.id ?? null,
          triggerEvent: build.trigger?.event ?? null,
          triggeredBy: build.trigger?.pusher ?? null,
          imageDigest: null,
          images: [],
        }),
        // One INSERT is atomic on its own.
        { transaction: false },
      );
      return { kind: 'created', build: saved };
    } catch (error) {
      switch (violatedConstraint(error)) {
        case 'builds_active_spec_key':
          return { kind: 'duplicate' };
        case 'builds_active_retry_key':
          return { kind: 'active-retry' };
        case 'builds_idempotency_key':
          return { kind: 'idempotency-clash' };
        // The project was deleted after its number was taken.
        case 'builds_tenant_id_project_id_fkey':
          return { kind: 'project-missing' };
        default:
          throw error;
      }
    }
  }

  /**
   * The project's next number, undefined when the tenant has no such project. The statement
   * commits without waiting for its WAL flush (synchronous_commit off for this transaction only),
   * so the row lock is released as soon as the update is done. This is safe: a crash can lose
   * the increment only while no build holding the number is durable, because a build's own
   * commit flushes the WAL up to and including the increment that came before it.
   */
  private async allocateNumber(tenantId: string, projectId: string): Promise<number | undefined> {
    // TypeORM answers an UPDATE with [rows, affected].
    const [rows] = await this.dataSource.query<[Array<{ number: number }>, number]>(
      `UPDATE projects SET next_build_number = next_build_number + 1, updated_at = now()
         FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
        WHERE id = $1 AND tenant_id = $2 RETURNING next_build_number - 1 AS number`,
      [projectId, tenantId],
    );
    return rows[0]?.number;
  }

  async findInTenant(tenantId: string, id: string): Promise<BuildEntity | undefined> {
    return this.one(`SELECT ${BUILD_COLUMNS} FROM builds WHERE id = $1 AND tenant_id = $2`, [
      id,
      tenantId,
    ]);
  }

  /** For runners and the operator, which act on a build id without a request's tenant. */
  async findById(id: string): Promise<BuildEntity | undefined> {
    return this.one(`SELECT ${BUILD_COLUMNS} FROM builds WHERE id = $1`, [id]);
  }

  async findByIdempotencyKey(tenantId: string, key: string): Promise<BuildEntity | undefined> {
    return this.one(
      `SELECT ${BUILD_COLUMNS} FROM builds WHERE tenant_id = $1 AND idempotency_key = $2`,
      [tenantId, key],
    );
  }

  /** The queued or running build of the project that a new one with this digest would repeat. */
  async findActiveDuplicate(
    projectId: string,
    specDigest: string,
  ): Promise<BuildEntity | undefined> {
    return (
      (await this.builds
        .createQueryBuilder('b')
        .where('b.project_id = :projectId AND b.spec_digest = :specDigest', {
          projectId,
          specDigest,
        })
        .andWhere("b.status IN ('queued', 'in_progress')")
        .getOne()) ?? undefined
    );
  }

  /**
   * The queued or running builds registered from a Build resource of this namespace and name
   * whose uid is not `uid`: their resource is gone (a new object took its name).
   */
  async findActiveOfReplacedResource(
    namespace: string,
    name: string,
    uid: string,
  ): Promise<BuildEntity[]> {
    return this.builds
      .createQueryBuilder('b')
      .where("b.config ->> 'form' = 'resource'")
      .andWhere("b.config ->> 'namespace' = :namespace AND b.config ->> 'name' = :name", {
        namespace,
        name,
      })
      .andWhere("b.config ->> 'uid' <> :uid", { uid })
      .andWhere("b.status IN ('queued', 'in_progress')")
      .getMany();
  }

  /** The queued or running retry of a failed build, if it has one. */
  async findActiveRetry(retryOf: string): Promise<BuildEntity | undefined> {
    return (
      (await this.builds
        .createQueryBuilder('b')
        .where('b.retry_of = :retryOf', { retryOf })
        .andWhere("b.status IN ('queued', 'in_progress')")
        .getOne()) ?? undefined
    );
  }

  /**
   * One page, read with one row past it so hasMore is exact whatever total says, and the total
   * (BuildPage.total), counted only when the page does not settle it.
   */
  async list(query: BuildListQuery): Promise<BuildPage> {
    const order = query.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const { where, params } = matching(query);
    // One project's builds by number: numbers do not tie within a project, and the unique
    // (tenant_id, project_id, build_number) key, which has no id to order by, is the index.
    const oneProjectByNumber =
      query.sortBy === 'build_number' &&
      query.projectId !== undefined &&
      query.status === undefined;
    const orderBy = `${SORT_COLUMNS[query.sortBy]} ${order}${oneProjectByNumber ? '' : `, b.id ${order}`}`;
    const rows = await this.dataSource.query<BuildRow[]>(
      `SELECT ${BUILD_COLUMNS} FROM builds b WHERE ${where} ORDER BY ${orderBy}
        LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, query.limit + 1, query.offset],
    );
    const hasMore = rows.length > query.limit;
    const builds = rows.slice(0, query.limit).map(buildOf);
    return { builds, hasMore, total: await this.total(query, builds.length, hasMore) };
  }

  /**
   * BuildPage.total for a page of `shown` rows. A page that reaches the last match (or an empty
   * first page) gives it exactly. Otherwise up to exactCountLimit + 1 matches are counted, which
   * costs a few milliseconds where count(*) over a million builds costs hundreds; past the limit
   * the planner's estimate stands in.
   */
  private async total(query: BuildListQuery, shown: number, hasMore: boolean): Promise<number> {
    const seen = query.offset + shown;
    if (!hasMore && (shown > 0 || query.offset === 0)) return seen;
    const counted = await this.countUpTo(query, this.exactCountLimit + 1);
    const total =
      counted <= this.exactCountLimit ? counted : Math.max(counted, await this.estimate(query));
    // The count sees a later snapshot than the page did: builds created or deleted in between
    // must not make the two disagree. An empty page past the end says at most `offset` match.
    return hasMore ? Math.max(total, seen + 1) : Math.min(total, query.offset);
  }

  /** How many builds match, counting no further than `cap`. */
  private async countUpTo(query: BuildListQuery, cap: number): Promise<number> {
    const { where, params } = matching(query);
    const [row] = await this.dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM builds b WHERE ${where}
         LIMIT $${params.length + 1}) AS capped`,
      [...params, cap],
    );
    return row?.n ?? 0;
  }

  /** The planner's estimate of how many builds match, from the table's statistics. */
  private async estimate(query: BuildListQuery): Promise<number> {
    const { where, params } = matching(query);
    const [row] = await this.dataSource.query<
      Array<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }>
    >(`EXPLAIN (FORMAT JSON) SELECT 1 FROM builds b WHERE ${where}`, params);
    return Math.round(row?.['QUERY PLAN'][0]?.Plan['Plan Rows'] ?? 0);
  }

  /** The one build a SELECT of BUILD_COLUMNS found, if it found one. */
  private async one(sql: string, params: unknown[]): Promise<BuildEntity | undefined> {
    const [row] = await this.dataSource.query<BuildRow[]>(sql, params);
    return row === undefined ? undefined : buildOf(row);
  }

  /**
   * The conditional update every state change goes through: it applies only while the build is
   * still in `from`, so of two racing writers exactly one wins. Undefined when it did not apply.
   * The statement commits by itself: what it answers is written.
   */
  async transition(
    id: string,
    tenantId: string | undefined,
    from: BuildStatus,
    to: BuildStatus,
    changes: TransitionChanges = {},
  ): Promise<Transitioned | undefined> {
    const sets = ['status = $3', 'updated_at = now()'];
    const params: unknown[] = [id, from, to];
    const set = (column: string, value: unknown) => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    if (changes.startedAt === 'now') sets.push('started_at = now()');
    if (changes.startedAt === null) sets.push('started_at = NULL');
    if (changes.completedAt === 'now') sets.push('completed_at = now()');
    else if (changes.completedAt !== undefined) {
      // A time from another clock (a cluster's) can fall before kiln's started_at or after the
      // write: a build never ends before it started, nor after kiln recorded its end.
      params.push(changes.completedAt);
      sets.push(
        `completed_at = LEAST(now(), GREATEST(started_at, $${params.length}::timestamptz))`,
      );
    }
    if (changes.errorMessage !== undefined) set('error_message', changes.errorMessage);
    if (changes.failureReason !== undefined) set('failure_reason', changes.failureReason);
    if (changes.cancelReason !== undefined) set('cancel_reason', changes.cancelReason);
    if (changes.runnerRef !== undefined) set('runner_ref', changes.runnerRef);
    if (changes.provenance !== undefined) set('provenance', changes.provenance);
    if (changes.pushed !== undefined) {
      set('image_digest', changes.pushed.digest);
      params.push(JSON.stringify(changes.pushed.images));
      sets.push(`images = $${params.length}::jsonb`);
    }
    let where = 'id = $1 AND status = $2';
    if (tenantId !== undefined) {
      params.push(tenantId);
      where += ` AND tenant_id = $${params.length}`;
    }
    params.push(STATUS_CHANNEL);
    // The change and its announcement (for live log streams) in one statement; the run's length
    // for kiln_build_duration_seconds, from admission's record of when the build was admitted.
    const [row] = await this.dataSource.query<Array<BuildRow & { run_seconds: number | null }>>(
      `WITH changed AS (UPDATE builds SET ${sets.join(', ')} WHERE ${where} RETURNING *)
       SELECT ${BUILD_COLUMNS}, pg_notify($${params.length}, id || ':' || status),
              extract(epoch FROM completed_at - coalesce(
                (SELECT a.admitted_at FROM build_admissions a WHERE a.build_id = changed.id),
                started_at))::float8 AS run_seconds
         FROM changed`,
      params,
    );
    return row === undefined ? undefined : { build: buildOf(row), runSeconds: row.run_seconds };
  }

  /** Records the runner's step count; only while the build runs. */
  async setProgress(id: string, current: number, total: number): Promise<boolean> {
    const [, affected] = await this.dataSource.query<[unknown[], number]>(
      `UPDATE builds SET progress_current = $2, progress_total = $3, updated_at = now()
        WHERE id = $1 AND status = 'in_progress'`,
      [id, current, total],
    );
    return affected > 0;
  }

  /** Running builds whose runner reference starts with `prefix` (or that have none). */
  async runningWithRunner(prefix: string): Promise<string[]> {
    const rows = await this.dataSource.query<Array<{ id: string }>>(
      `SELECT id FROM builds WHERE status = 'in_progress' AND (runner_ref IS NULL OR starts_with(runner_ref, $1))`,
      [prefix],
    );
    return rows.map((row) => row.id);
  }

  async setRunnerRef(id: string, runnerRef: string): Promise<void> {
    await this.builds.update({ id }, { runnerRef });
  }

  /** Pins or unpins a build of the tenant; undefined when it has no such build. */
  async setKeep(tenantId: string, id: string, keep: boolean): Promise<BuildEntity | undefined> {
    return this.one(
      `WITH changed AS (UPDATE builds SET keep = $3, updated_at = now()
                          WHERE id = $1 AND tenant_id = $2 RETURNING *)
       SELECT ${BUILD_COLUMNS} FROM changed`,
      [id, tenantId, keep],
    );
  }

  /** Deletes the build unless it is running (checked in the same statement). */
  async deleteUnlessRunning(tenantId: string, id: string): Promise<boolean> {
    const [, affected] = await this.dataSource.query<[unknown[], number]>(
      `DELETE FROM builds WHERE id = $1 AND tenant_id = $2 AND status <> 'in_progress'`,
      [id, tenantId],
    );
    return affected > 0;
  }

  /** Median run time of the project's last successful builds, in ms; undefined without history. */
  async medianSuccessDurationMs(projectId: string, sample = 20): Promise<number | undefined> {
    const rows = await this.dataSource.query<Array<{ ms: number | null }>>(
      `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at) * 1000) AS ms
         FROM (SELECT started_at, completed_at FROM builds
                WHERE project_id = $1 AND status = 'success' AND started_at IS NOT NULL
                  AND completed_at IS NOT NULL
                ORDER BY completed_at DESC LIMIT $2) recent`,
      [projectId, sample],
    );
    const ms = rows[0]?.ms;
    return ms === null || ms === undefined ? undefined : Number(ms);
  }
}

/**
 * The builds the query's filters select (alias `b`), as SQL and its parameters ($1 the tenant).
 * Another tenant's project matches nothing: the planner takes every project to be in the tenant
 * asked for and may read the tenant's builds looking for it; the EXISTS check, made once before
 * the scan, ends such a read before it starts.
 */
function matching(query: BuildListQuery): { where: string; params: unknown[] } {
  const params: unknown[] = [query.tenantId];
  let where = 'b.tenant_id = $1';
  if (query.status !== undefined) {
    params.push(query.status);
    where += ` AND b.status = $${params.length}`;
  }
  if (query.projectId !== undefined) {
    params.push(query.projectId);
    const project = `$${params.length}`;
    where += ` AND b.project_id = ${project}
      AND EXISTS (SELECT 1 FROM projects p WHERE p.id = ${project} AND p.tenant_id = $1)`;
  }
  return { where, params };
}

/**
 * The columns of builds as BuildEntity names them, for the reads that skip TypeORM's query
 * builder and entity hydration (the hot paths: a build, a page of builds, a transition).
 */
const BUILD_FIELDS = {
  id: 'id',
  tenant_id: 'tenantId',
  project_id: 'projectId',
  build_number: 'buildNumber',
  status: 'status',
  git_branch: 'gitBranch',
  git_commit: 'gitCommit',
  git_author_name: 'gitAuthorName',
  git_author_email: 'gitAuthorEmail',
  method: 'method',
  config: 'config',
  spec: 'spec',
  error_message: 'errorMessage',
  failure_reason: 'failureReason',
  cancel_reason: 'cancelReason',
  retry_of: 'retryOf',
  progress_current: 'progressCurrent',
  progress_total: 'progressTotal',
  runner_ref: 'runnerRef',
  idempotency_key: 'idempotencyKey',
  request_hash: 'requestHash',
  spec_digest: 'specDigest',
  created_by: 'createdBy',
  image_digest: 'imageDigest',
  images: 'images',
  keep: 'keep',
  trigger_id: 'triggerId',
  trigger_event: 'triggerEvent',
  triggered_by: 'triggeredBy',
  provenance: 'provenance',
  started_at: 'startedAt',
  completed_at: 'completedAt',
  created_at: 'createdAt',
  updated_at: 'updatedAt',
} as const satisfies Record<string, keyof BuildEntity>;

const BUILD_COLUMNS = Object.keys(BUILD_FIELDS).join(', ');

type BuildRow = Record<keyof typeof BUILD_FIELDS, unknown>;

/** A row of BUILD_COLUMNS as the entity (pg has already parsed timestamps, integers and jsonb). */
function buildOf(row: BuildRow): BuildEntity {
  const build = new BuildEntity();
  const fields = build as unknown as Record<string, unknown>;
  for (const [column, field] of Object.entries(BUILD_FIELDS)) {
    fields[field] = row[column as keyof BuildRow];
  }
  return build;
}
