import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  ADMISSION_LOCK,
  ADMIT_ALL,
  admitOf,
  GENERATION,
  literalsOf,
  PLACE_COLUMNS,
  parametersOf,
  QUEUE,
  type QueueScope,
  SWEEP,
} from './admission.sql.js';
import type { AdmissionLimits, WaitReason } from './fair-share.js';

export interface AdmittedBuild {
  readonly buildId: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly queuedAt: Date;
  readonly admittedAt: Date;
  /** What it waited for when a pass saw it waiting (null: admitted by the pass after its start). */
  readonly waitedFor: string | null;
  /** The build's method (its spec's). */
  readonly method: string;
}

/** What `enqueue` recorded: a wait, or an admission at once (with its times and method). */
export type Enqueued =
  | { readonly kind: 'waiting' }
  | {
      readonly kind: 'admitted';
      readonly tenantId: string;
      readonly method: string;
      readonly queuedAt: Date;
      readonly admittedAt: Date;
    };

/**
 * The open rows of build_admissions whose build still runs, grouped as the scrape-time gauges
 * read them (AdmissionMetrics).
 */
export interface QueueGaugeRow {
  /** The tenant's id, or null when not grouped by tenant. */
  readonly tenantId: string | null;
  readonly admitted: boolean;
  /** What they wait for: admission's reason (`Pending` before one is written), the cluster's. */
  readonly reason: string | null;
  readonly builds: number;
  /** Seconds the longest of them has waited to be admitted (null: admitted). */
  readonly oldestSeconds: number | null;
}

export interface WaitingPlace {
  /** 1-based, across the installation, in the order admission takes the waiting builds now. */
  readonly position: number;
  readonly reason: WaitReason;
}

/** A waiting build as `places` answers it: its place, and the counts its reason is told with. */
export interface QueuePlaceRow extends WaitingPlace {
  /** Builds running in the installation, in the build's tenant and in its project. */
  readonly runningTotal: number;
  readonly tenantRunning: number;
  /** The tenant's own limit, else the default (null: none). */
  readonly tenantMax: number | null;
  readonly projectRunning: number;
  /** 1-based, among the waiting builds of its tenant, and of its project, first started first. */
  readonly tenantRank: number;
  readonly projectRank: number;
  readonly queuedAt: Date;
}

/** A waiting build whose reason changed (`before` null: it has just begun to wait). */
export interface ReasonChange {
  readonly buildId: string;
  readonly before: string | null;
  /** Where it stands now, with the counts its reason is told with. */
  readonly place: QueuePlaceRow;
}

/**
 * Every waiting build's place, as one statement saw them, and the queue's generation read just
 * before it: while the generation stays the same, so does every place.
 */
export interface QueueOrder {
  readonly generation: string;
  readonly places: ReadonlyMap<string, QueuePlaceRow>;
}

/** A build's row in build_admissions. */
export interface AdmissionState {
  readonly queuedAt: Date;
  readonly admittedAt: Date | null;
  readonly releasedAt: Date | null;
  /** What it waits for now (admission's reason, or the cluster's once admitted); null: nothing. */
  readonly reason: string | null;
  readonly message: string | null;
}

/** What a release ended: a run (its slot is free), a wait (it held nothing), or nothing. */
export type Released = 'running' | 'waiting' | 'nothing';

interface PlaceRow {
  build_id: string;
  position: number;
  held_by: WaitReason | null;
  slots: number | null;
  running_total: number;
  tenant_running: number;
  tenant_max: number | null;
  project_running: number;
  tenant_rank: number;
  project_rank: number;
  queued_at: Date;
}

function placeOf(row: PlaceRow): QueuePlaceRow {
  return {
    position: row.position,
    reason:
      row.held_by ??
      (row.slots === null || row.position <= row.slots ? 'Admissible' : 'InstallationLimit'),
    runningTotal: row.running_total,
    tenantRunning: row.tenant_running,
    tenantMax: row.tenant_max,
    projectRunning: row.project_running,
    tenantRank: row.tenant_rank,
    projectRank: row.project_rank,
    queuedAt: row.queued_at,
  };
}

interface AdmittedRow {
  build_id: string;
  tenant_id: string;
  project_id: string;
  queued_at: Date;
  admitted_at: Date;
  before: string | null;
  method: string;
}

/**
 * Admission's record (build_admissions): who waits, who runs, in plain SQL. Postgres is the
 * arbiter: every kiln process admits through `admit`, which never lets the running builds pass a
 * limit, however many processes call it at once.
 */
@Injectable()
export class AdmissionStore {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Records that a started (in_progress) build waits, from when it was started (its tenant and
   * project read from the build). A build started again after its start was taken back (the
   * runner was away) waits again, in its old place. Answers what it recorded: `waiting`, or
   * `admitted` when `atOnce` (no installation, default tenant or project limit applies) and no
   * tenant has a limit of its own either, so nothing could hold it; undefined when it changed
   * nothing (the build waits or ran already, is not in_progress, or does not exist).
   */
  async enqueue(buildId: string, atOnce = false): Promise<Enqueued | undefined> {
    const [row] = await this.dataSource.query<
      Array<{
        tenant_id: string;
        queued_at: Date;
        admitted_at: Date | null;
        method: string;
      }>
    >(
      `WITH enqueued AS (
         INSERT INTO build_admissions (build_id, tenant_id, project_id, queued_at, admitted_at)
         SELECT id, tenant_id, project_id, coalesce(started_at, now()),
                CASE WHEN $2::boolean AND NOT EXISTS (
                       SELECT 1 FROM tenant_admission_settings WHERE max_running IS NOT NULL)
                     THEN statement_timestamp() END
           FROM builds WHERE id = $1 AND status = 'in_progress'
         ON CONFLICT (build_id) DO UPDATE
            SET queued_at = EXCLUDED.queued_at, admitted_at = EXCLUDED.admitted_at,
                released_at = NULL, reason = NULL, message = NULL
          WHERE build_admissions.admitted_at IS NULL AND build_admissions.released_at IS NOT NULL
         RETURNING build_id, tenant_id, queued_at, admitted_at)
       SELECT e.tenant_id, e.queued_at, e.admitted_at, b.spec ->> 'method' AS method
         FROM enqueued e JOIN builds b ON b.id = e.build_id`,
      [buildId, atOnce],
    );
    if (row === undefined) return undefined;
    if (row.admitted_at === null) return { kind: 'waiting' };
    return {
      kind: 'admitted',
      tenantId: row.tenant_id,
      method: row.method,
      queuedAt: row.queued_at,
      admittedAt: row.admitted_at,
    };
  }

  /**
   * Records a started build that runs already as admitted (now), unless admission knows it as
   * admitted or ended: its slot is counted until it ends. One recorded as waiting is admitted (its
   * Job exists: it runs whatever the queue says). Answers false when it changed nothing.
   */
  async adopt(buildId: string): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO build_admissions (build_id, tenant_id, project_id, queued_at, admitted_at)
       SELECT id, tenant_id, project_id, coalesce(started_at, now()), statement_timestamp()
         FROM builds WHERE id = $1 AND status = 'in_progress'
       ON CONFLICT (build_id) DO UPDATE
          SET admitted_at = EXCLUDED.admitted_at, reason = NULL, message = NULL
        WHERE build_admissions.admitted_at IS NULL AND build_admissions.released_at IS NULL
       RETURNING build_id`,
      [buildId],
    );
    return rows.length > 0;
  }

  /**
   * Admits waiting builds by fair share until the installation has no free slot or no waiting
   * build fits its tenant's and project's limits, and answers them in the order taken. One
   * transaction under the admission lock: no two passes, in any process, count the same slot.
   * admitted_at is the time of the admitting statement, after the lock was taken. One round trip
   * (docs/adr/0042-admission-in-postgres.md): the lock and the statements after it, each with its
   * own snapshot, taken once the lock is held.
   */
  async admit(limits: AdmissionLimits): Promise<AdmittedBuild[]> {
    const { maxRunning, tenantMaxRunning, projectMaxRunning } = limits;
    // With an installation limit only the first (free slots) waiting builds of each project, or
    // tenant, can be taken; none is read when no slot is free.
    const scope: QueueScope | null =
      maxRunning === undefined
        ? null
        : { by: projectMaxRunning === undefined ? 'tenant' : 'project' };
    // No limit anywhere: every waiting build runs, first started first, without ordering the
    // queue, unless a tenant has a limit of its own (then ADMIT_ALL admits nothing).
    const unlimited =
      maxRunning === undefined && tenantMaxRunning === undefined && projectMaxRunning === undefined;
    const literals = literalsOf(limits);
    const [, ...admitting] = await this.inOneTrip<AdmittedRow>([
      ADMISSION_LOCK,
      ...(unlimited ? [ADMIT_ALL] : []),
      admitOf(scope, literals),
    ]);
    const rows = admitting.flat();
    return rows.map((row) => ({
      buildId: row.build_id,
      tenantId: row.tenant_id,
      projectId: row.project_id,
      queuedAt: row.queued_at,
      admittedAt: row.admitted_at,
      waitedFor: row.before,
      method: row.method,
    }));
  }

  /**
   * Ends a build's wait or run: an admitted build frees its slot, a waiting one leaves the queue
   * having held nothing. Answers what it ended; a second call ends nothing.
   */
  async release(buildId: string): Promise<Released> {
    const [rows] = await this.dataSource.query<[Array<{ admitted: boolean }>, number]>(
      `UPDATE build_admissions SET released_at = statement_timestamp()
        WHERE build_id = $1 AND released_at IS NULL
       RETURNING admitted_at IS NOT NULL AS admitted`,
      [buildId],
    );
    const [row] = rows;
    if (row === undefined) return 'nothing';
    return row.admitted ? 'running' : 'waiting';
  }

  /**
   * Ends the wait or run of every build that is no longer in_progress, whether or not whoever
   * ended it (a cancel, a failure, a process that died between the two writes) said so: no slot
   * leaks. Answers how many it ended. Takes no lock: it only frees.
   */
  async sweep(): Promise<number> {
    const [, count] = await this.dataSource.query<[unknown[], number]>(SWEEP);
    return count;
  }

  /** Where each of `buildIds` stands now under `limits`; a build that does not wait is absent. */
  async places(
    buildIds: readonly string[],
    limits: AdmissionLimits,
  ): Promise<Map<string, QueuePlaceRow>> {
    const places = new Map<string, QueuePlaceRow>();
    if (buildIds.length === 0) return places;
    const rows = await this.dataSource.query<PlaceRow[]>(
      `WITH ${QUEUE}
       SELECT ${PLACE_COLUMNS}
         FROM places p CROSS JOIN free JOIN build_admissions a ON a.build_id = p.build_id
        WHERE p.build_id = ANY($4::uuid[])`,
      [...parametersOf(limits), buildIds],
    );
    for (const row of rows) places.set(row.build_id, placeOf(row));
    return places;
  }

  /**
   * Every waiting build's place under `limits`, with the generation read before them: one order
   * of the whole queue, for a process to answer many places from.
   */
  async order(limits: AdmissionLimits): Promise<QueueOrder> {
    const generation = await this.generation();
    const rows = await this.dataSource.query<PlaceRow[]>(
      `WITH ${QUEUE}
       SELECT ${PLACE_COLUMNS}
         FROM places p CROSS JOIN free JOIN build_admissions a ON a.build_id = p.build_id`,
      parametersOf(limits),
    );
    return { generation, places: new Map(rows.map((row) => [row.build_id, placeOf(row)])) };
  }

  /** The queue's generation: the same while no build begins to wait, is admitted or ends. */
  async generation(): Promise<string> {
    const [{ generation }] = await this.dataSource.query<[{ generation: string }]>(GENERATION);
    return generation;
  }

  /**
   * Writes what every waiting build waits for now (`reason`), under the admission lock so that no
   * pass admits in between, and answers the builds whose reason changed, with where they stand.
   * A first reason is the start of a wait.
   */
  async refreshReasons(limits: AdmissionLimits): Promise<ReasonChange[]> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(ADMISSION_LOCK);
      const rows = await manager.query<Array<PlaceRow & { before: string | null }>>(
        `WITH ${QUEUE},
         now_waiting AS (
           SELECT ${PLACE_COLUMNS}, a.reason AS before,
                  coalesce(p.held_by,
                           CASE WHEN free.slots IS NULL OR p.position <= free.slots
                                THEN 'Admissible' ELSE 'InstallationLimit' END) AS reason
             FROM places p CROSS JOIN free JOIN build_admissions a ON a.build_id = p.build_id
         ),
         changed AS (
           SELECT * FROM now_waiting n
            -- Admissible is no wait: the next pass takes it (a line would say it waited 0 s).
            WHERE n.before IS DISTINCT FROM n.reason AND n.reason <> 'Admissible'
         ),
         written AS (
           UPDATE build_admissions a SET reason = c.reason, message = NULL
             FROM changed c WHERE a.build_id = c.build_id
           RETURNING a.build_id
         )
         SELECT * FROM changed c ORDER BY c.position`,
        parametersOf(limits),
      );
      return rows.map((row) => ({
        buildId: row.build_id,
        before: row.before,
        place: placeOf(row),
      }));
    });
  }

  /**
   * Sets what an admitted build waits for in the cluster (its pod not yet running: a quota, the
   * scheduler, an image), or clears it (undefined). Answers whether the reason changed (a new
   * message for the same reason, such as a refusal naming the next pod, is written silently).
   */
  async setClusterReason(
    buildId: string,
    wait: { reason: string; message: string } | undefined,
  ): Promise<boolean> {
    const [rows] = await this.dataSource.query<[Array<{ changed: boolean }>, number]>(
      `UPDATE build_admissions a SET reason = $2, message = $3
         FROM (SELECT reason FROM build_admissions WHERE build_id = $1 FOR UPDATE) before
        WHERE a.build_id = $1 AND a.admitted_at IS NOT NULL AND a.released_at IS NULL
          AND (a.reason IS DISTINCT FROM $2 OR a.message IS DISTINCT FROM $3)
       RETURNING before.reason IS DISTINCT FROM $2 AS changed`,
      [buildId, wait?.reason ?? null, wait?.message ?? null],
    );
    return rows[0]?.changed ?? false;
  }

  /**
   * What admission knows of each of `buildIds` (a build never enqueued is absent), and the
   * queue's generation as the same statement saw it.
   */
  async states(
    buildIds: readonly string[],
  ): Promise<{ generation: string; states: Map<string, AdmissionState> }> {
    const rows = await this.dataSource.query<
      Array<{
        generation: string;
        build_id: string | null;
        queued_at: Date;
        admitted_at: Date | null;
        released_at: Date | null;
        reason: string | null;
        message: string | null;
      }>
    >(
      `SELECT g.generation, a.build_id, a.queued_at, a.admitted_at, a.released_at, a.reason,
              a.message
         FROM (${GENERATION}) g
         LEFT JOIN build_admissions a ON a.build_id = ANY($1::uuid[])`,
      [buildIds],
    );
    const states = new Map<string, AdmissionState>();
    for (const row of rows) {
      if (row.build_id === null) continue;
      states.set(row.build_id, {
        queuedAt: row.queued_at,
        admittedAt: row.admitted_at,
        releasedAt: row.released_at,
        reason: row.reason,
        message: row.message,
      });
    }
    return { generation: rows[0]?.generation ?? '0', states };
  }

  /**
   * The builds admission holds open whose build still runs, counted by whether they are admitted
   * and what they wait for (and by tenant when `byTenant`), with the longest wait to be admitted:
   * the scrape-time gauges, in one statement over the open rows (build_admissions_open_idx).
   */
  async gauges(byTenant: boolean): Promise<QueueGaugeRow[]> {
    const rows = await this.dataSource.query<
      Array<{
        tenant_id: string | null;
        admitted: boolean;
        reason: string | null;
        builds: number;
        oldest: number | null;
      }>
    >(
      `SELECT CASE WHEN $1::boolean THEN a.tenant_id END AS tenant_id,
              a.admitted_at IS NOT NULL AS admitted,
              CASE WHEN a.admitted_at IS NULL THEN coalesce(a.reason, 'Pending') ELSE a.reason END
                AS reason,
              count(*)::int AS builds,
              extract(epoch FROM statement_timestamp() - min(a.queued_at))::float8 AS oldest
         FROM build_admissions a JOIN builds b ON b.id = a.build_id
        WHERE a.released_at IS NULL AND b.status = 'in_progress'
        GROUP BY 1, 2, 3`,
      [byTenant],
    );
    return rows.map((row) => ({
      tenantId: row.tenant_id,
      admitted: row.admitted,
      reason: row.reason,
      builds: row.builds,
      oldestSeconds: row.admitted ? null : row.oldest,
    }));
  }

  /** How many builds of the tenant wait to be admitted. */
  async waitingOfTenant(tenantId: string): Promise<number> {
    const [{ n }] = await this.dataSource.query<[{ n: number }]>(
      `SELECT count(*)::int AS n FROM build_admissions
        WHERE tenant_id = $1 AND admitted_at IS NULL AND released_at IS NULL`,
      [tenantId],
    );
    return n;
  }

  /** Builds that have waited since before `before`, oldest first, with what they wait for. */
  async waitingSince(
    before: Date,
    limit = 100,
  ): Promise<Array<{ buildId: string; queuedAt: Date; reason: string | null }>> {
    const rows = await this.dataSource.query<
      Array<{ build_id: string; queued_at: Date; reason: string | null }>
    >(
      `SELECT build_id, queued_at, reason FROM build_admissions
        WHERE admitted_at IS NULL AND released_at IS NULL AND queued_at < $1
        ORDER BY queued_at LIMIT $2`,
      [before, limit],
    );
    return rows.map((row) => ({
      buildId: row.build_id,
      queuedAt: row.queued_at,
      reason: row.reason,
    }));
  }

  /**
   * What the estimate of a start reads: how long each running build has run (ms, longest first)
   * and the median run of the last `sample` builds that ran to their end (undefined: none yet).
   */
  async outlook(
    scope: { tenantId?: string; projectId?: string } = {},
    sample = 50,
  ): Promise<{ runningMs: number[]; medianRunMs: number | undefined }> {
    const [running, median] = await Promise.all([
      this.dataSource.query<Array<{ ms: number }>>(
        `SELECT (extract(epoch FROM statement_timestamp() - admitted_at) * 1000)::float8 AS ms
           FROM build_admissions
          WHERE admitted_at IS NOT NULL AND released_at IS NULL
            AND ($1::uuid IS NULL OR tenant_id = $1) AND ($2::uuid IS NULL OR project_id = $2)
          ORDER BY admitted_at`,
        [scope.tenantId ?? null, scope.projectId ?? null],
      ),
      this.dataSource.query<Array<{ ms: number | null }>>(
        `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::float8 AS ms FROM (
           SELECT extract(epoch FROM released_at - admitted_at) * 1000 AS ms
             FROM build_admissions
            WHERE admitted_at IS NOT NULL AND released_at IS NOT NULL
            ORDER BY released_at DESC LIMIT $1) recent`,
        [sample],
      ),
    ]);
    return {
      runningMs: running.map((row) => row.ms),
      medianRunMs: median[0]?.ms ?? undefined,
    };
  }

  /**
   * Sends `statements` (no parameters: literals only) in one round trip, as one transaction (an
   * error in any rolls back every one); each statement takes its own snapshot when it begins, so
   * one that follows a lock sees what committed before the lock was granted. Answers each
   * statement's rows, in order.
   */
  private async inOneTrip<Row>(statements: readonly string[]): Promise<Row[][]> {
    const runner = this.dataSource.createQueryRunner();
    try {
      // TypeORM answers one result only: the driver's client answers one per statement.
      const client = (await runner.connect()) as SimpleQueryClient<Row>;
      const results = await client.query(statements.join(';\n'));
      return (Array.isArray(results) ? results : [results]).map((result) => result.rows);
    } finally {
      await runner.release();
    }
  }
}

/** The pg client under a TypeORM query runner, as a query without parameters answers. */
interface SimpleQueryClient<Row> {
  query(text: string): Promise<{ rows: Row[] } | Array<{ rows: Row[] }>>;
}
