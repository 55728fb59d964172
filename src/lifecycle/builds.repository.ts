import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager, type Repository } from 'typeorm';
import { STATUS_CHANNEL } from '../database/channels.js';
import type { BuildSpec } from '../build-methods/build-spec.js';
import type { PushedImages } from '../steps/pushed-image.js';
import { type BuildConfigSnapshot, BuildEntity } from './build.entity.js';
import type { BuildStatus, FailureReason } from './build-state.js';

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
  readonly retryOf?: string | null;
  readonly idempotencyKey?: string | null;
  readonly requestHash?: string | null;
  readonly createdBy?: string | null;
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
}

export type InsertOutcome =
  | { kind: 'created'; build: BuildEntity }
  | { kind: 'project-missing' }
  | { kind: 'duplicate' }
  | { kind: 'active-retry' }
  | { kind: 'idempotency-clash' };

function uniqueViolationConstraint(error: unknown): string | undefined {
  const driverError = (error as { driverError?: { code?: unknown; constraint?: unknown } })
    .driverError;
  return driverError?.code === '23505' && typeof driverError.constraint === 'string'
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

  constructor(private readonly dataSource: DataSource) {
    this.builds = dataSource.getRepository(BuildEntity);
  }

  /**
   * Allocates the project's next build number and inserts the build in one transaction: a failed
   * insert (duplicate, idempotency clash) rolls the number back, so numbers have no gaps.
   */
  async insert(build: NewBuild): Promise<InsertOutcome> {
    try {
      return await this.dataSource.transaction(async (manager) => {
        const number = await this.allocateNumber(manager, build.tenantId, build.projectId);
        if (number === undefined) return { kind: 'project-missing' as const };
        const repo = manager.getRepository(BuildEntity);
        const saved = await repo.save(
          repo.create({
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
            retryOf: build.retryOf ?? null,
            idempotencyKey: build.idempotencyKey ?? null,
            requestHash: build.requestHash ?? null,
            createdBy: build.createdBy ?? null,
            imageDigest: null,
            images: [],
          }),
        );
        return { kind: 'created' as const, build: saved };
      });
    } catch (error) {
      const constraint = uniqueViolationConstraint(error);
      if (constraint === 'builds_active_duplicate_key') return { kind: 'duplicate' };
      if (constraint === 'builds_active_retry_key') return { kind: 'active-retry' };
      if (constraint === 'builds_idempotency_key') return { kind: 'idempotency-clash' };
      throw error;
    }
  }

  private async allocateNumber(
    manager: EntityManager,
    tenantId: string,
    projectId: string,
  ): Promise<number | undefined> {
    // TypeORM answers an UPDATE with [rows, affected].
    const [rows] = await manager.query<[Array<{ number: number }>, number]>(
      `UPDATE projects SET next_build_number = next_build_number + 1, updated_at = now()
        WHERE id = $1 AND tenant_id = $2 RETURNING next_build_number - 1 AS number`,
      [projectId, tenantId],
    );
    return rows[0]?.number;
  }

  async findInTenant(tenantId: string, id: string): Promise<BuildEntity | undefined> {
    return (await this.builds.findOneBy({ tenantId, id })) ?? undefined;
  }

  /** For runners and the operator, which act on a build id without a request's tenant. */
  async findById(id: string): Promise<BuildEntity | undefined> {
    return (await this.builds.findOneBy({ id })) ?? undefined;
  }

  async findByIdempotencyKey(tenantId: string, key: string): Promise<BuildEntity | undefined> {
    return (await this.builds.findOneBy({ tenantId, idempotencyKey: key })) ?? undefined;
  }

  /** The queued or running build that a new one with these coordinates would duplicate. */
  async findActiveDuplicate(
    projectId: string,
    gitBranch: string,
    gitCommit: string | null,
  ): Promise<BuildEntity | undefined> {
    return (
      (await this.builds
        .createQueryBuilder('b')
        .where('b.project_id = :projectId AND b.git_branch = :gitBranch', { projectId, gitBranch })
        .andWhere("coalesce(b.git_commit, '') = :gitCommit", { gitCommit: gitCommit ?? '' })
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

  async list(query: BuildListQuery): Promise<{ builds: BuildEntity[]; total: number }> {
    const qb = this.builds.createQueryBuilder('b').where('b.tenant_id = :tenantId', {
      tenantId: query.tenantId,
    });
    if (query.status !== undefined) qb.andWhere('b.status = :status', { status: query.status });
    if (query.projectId !== undefined) {
      qb.andWhere('b.project_id = :projectId', { projectId: query.projectId });
    }
    const order = query.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const [builds, total] = await qb
      .orderBy(SORT_COLUMNS[query.sortBy], order)
      .addOrderBy('b.id', order)
      .offset(query.offset)
      .limit(query.limit)
      .getManyAndCount();
    return { builds, total };
  }

  /**
   * The conditional update every state change goes through: it applies only while the build is
   * still in `from`, so of two racing writers exactly one wins. Undefined when it did not apply.
   */
  async transition(
    id: string,
    tenantId: string | undefined,
    from: BuildStatus,
    to: BuildStatus,
    changes: TransitionChanges = {},
  ): Promise<BuildEntity | undefined> {
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
    // The change and its announcement (for live log streams) in one statement.
    const rows = await this.dataSource.query<Array<{ id: string }>>(
      `WITH changed AS (UPDATE builds SET ${sets.join(', ')} WHERE ${where} RETURNING id, status)
       SELECT id, pg_notify($${params.length}, id || ':' || status) FROM changed`,
      params,
    );
    return rows.length === 0 ? undefined : this.findById(id);
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
