import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AdmissionLimits, WaitReason } from './fair-share.js';

export interface AdmittedBuild {
  readonly buildId: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly queuedAt: Date;
  readonly admittedAt: Date;
}

export interface WaitingPlace {
  /** 1-based, across the installation, in the order admission takes the waiting builds now. */
  readonly position: number;
  readonly reason: WaitReason;
}

/** What a release ended: a run (its slot is free), a wait (it held nothing), or nothing. */
export type Released = 'running' | 'waiting' | 'nothing';

/**
 * Every admission pass of every kiln process takes this lock for its transaction: two passes
 * never count the same free slot.
 */
const ADMISSION_LOCK = `SELECT pg_advisory_xact_lock(hashtext('kiln_admission'))`;

/**
 * The waiting builds in the order admission takes them, with their position and what holds them
 * back (docs/adr/0042-admission-in-postgres.md). The rule of fair-share.ts in closed form: a
 * tenant's k-th admissible build would run as the tenant's (running + k)-th, so its key is
 * (running + k - 1) / weight; sorting every admissible build by (key, the tenant's last admission,
 * seq) gives the order the rule takes them in one slot at a time. A build is admissible when the
 * running and earlier waiting builds of its project (project_slot) and of its tenant
 * (tenant_slot, counting only builds whose project fits) stay within their limits. Held builds
 * follow, ordered by the same key without limits.
 *
 * $1: the tenants' default limit, $2: the projects' limit (null: none).
 */
const QUEUE = `
  running AS (
    SELECT tenant_id, project_id, count(*)::int AS n
      FROM build_admissions
     WHERE admitted_at IS NOT NULL AND released_at IS NULL
     GROUP BY tenant_id, project_id
  ),
  queue AS (
    SELECT a.build_id, a.tenant_id, a.project_id, a.seq,
           coalesce(r.n, 0) + row_number() OVER (PARTITION BY a.tenant_id, a.project_id
                                                 ORDER BY a.seq) AS project_slot,
           row_number() OVER (PARTITION BY a.tenant_id ORDER BY a.seq) AS tenant_rank
      FROM build_admissions a
      LEFT JOIN running r ON r.tenant_id = a.tenant_id AND r.project_id = a.project_id
     WHERE a.admitted_at IS NULL AND a.released_at IS NULL
  ),
  tenants AS (
    SELECT q.tenant_id,
           coalesce((SELECT sum(r.n) FROM running r WHERE r.tenant_id = q.tenant_id), 0)::int
             AS running,
           coalesce(s.weight, 1) AS weight,
           coalesce(s.max_running, $1::int) AS max_running,
           (SELECT max(l.admitted_at) FROM build_admissions l
             WHERE l.tenant_id = q.tenant_id AND l.admitted_at IS NOT NULL) AS last_admitted_at
      FROM (SELECT DISTINCT tenant_id FROM queue) q
      LEFT JOIN tenant_admission_settings s ON s.tenant_id = q.tenant_id
  ),
  fits AS (
    SELECT q.*, t.running, t.weight, t.max_running, t.last_admitted_at,
           ($2::int IS NULL OR q.project_slot <= $2::int) AS project_fits
      FROM queue q JOIN tenants t ON t.tenant_id = q.tenant_id
  ),
  slots AS (
    SELECT f.*,
           f.running + row_number() OVER (PARTITION BY f.tenant_id, f.project_fits
                                          ORDER BY f.seq) AS tenant_slot
      FROM fits f
  ),
  held AS (
    SELECT s.*,
           CASE WHEN NOT s.project_fits THEN 'ProjectLimit'
                WHEN s.tenant_slot > s.max_running THEN 'TenantLimit' END AS held_by
      FROM slots s
  ),
  places AS (
    SELECT h.build_id, h.held_by,
           row_number() OVER (ORDER BY h.held_by IS NOT NULL,
                                       CASE WHEN h.held_by IS NULL
                                            THEN (h.tenant_slot - 1)::float8 / h.weight
                                            ELSE (h.running + h.tenant_rank - 1)::float8 / h.weight
                                       END,
                                       h.last_admitted_at NULLS FIRST,
                                       h.seq)::int AS position
      FROM held h
  ),
  free AS (
    -- Slots the installation has free ($3; null: no limit, and so is this).
    SELECT $3::int - coalesce(sum(n), 0)::int AS slots FROM running
  )`;

interface AdmittedRow {
  build_id: string;
  tenant_id: string;
  project_id: string;
  queued_at: Date;
  admitted_at: Date;
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
   * Records that a started build waits (its tenant and project read from the build). Answers
   * false when it changed nothing: the build was recorded before, or does not exist.
   */
  async enqueue(buildId: string): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO build_admissions (build_id, tenant_id, project_id)
       SELECT id, tenant_id, project_id FROM builds WHERE id = $1
       ON CONFLICT (build_id) DO NOTHING
       RETURNING build_id`,
      [buildId],
    );
    return rows.length > 0;
  }

  /**
   * Admits waiting builds by fair share until the installation has no free slot or no waiting
   * build fits its tenant's and project's limits, and answers them in the order taken. One
   * transaction under the admission lock: no two passes, in any process, count the same slot.
   * admitted_at is the time of the admitting statement, after the lock was taken.
   */
  async admit(limits: AdmissionLimits): Promise<AdmittedBuild[]> {
    const rows = await this.dataSource.transaction(async (manager) => {
      await manager.query(ADMISSION_LOCK);
      return manager.query<AdmittedRow[]>(
        `WITH ${QUEUE},
         chosen AS (
           SELECT p.build_id, p.position FROM places p, free
            WHERE p.held_by IS NULL AND (free.slots IS NULL OR p.position <= free.slots)
         ),
         admitted AS (
           UPDATE build_admissions a SET admitted_at = statement_timestamp()
             FROM chosen c
            WHERE a.build_id = c.build_id AND a.admitted_at IS NULL AND a.released_at IS NULL
           RETURNING a.build_id, a.tenant_id, a.project_id, a.queued_at, a.admitted_at, c.position
         )
         SELECT build_id, tenant_id, project_id, queued_at, admitted_at
           FROM admitted ORDER BY position`,
        [
          limits.tenantMaxRunning ?? null,
          limits.projectMaxRunning ?? null,
          limits.maxRunning ?? null,
        ],
      );
    });
    return rows.map((row) => ({
      buildId: row.build_id,
      tenantId: row.tenant_id,
      projectId: row.project_id,
      queuedAt: row.queued_at,
      admittedAt: row.admitted_at,
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
   * Where a waiting build stands now under `limits`, and what it waits for; undefined when it
   * does not wait (never enqueued, admitted, or released).
   */
  async waiting(buildId: string, limits: AdmissionLimits): Promise<WaitingPlace | undefined> {
    const [row] = await this.dataSource.query<
      Array<{ position: number; held_by: WaitReason | null; slots: number | null }>
    >(
      `WITH ${QUEUE}
       SELECT p.position, p.held_by, free.slots FROM places p, free WHERE p.build_id = $4`,
      [
        limits.tenantMaxRunning ?? null,
        limits.projectMaxRunning ?? null,
        limits.maxRunning ?? null,
        buildId,
      ],
    );
    if (row === undefined) return undefined;
    const reason =
      row.held_by ??
      (row.slots === null || row.position <= row.slots ? 'Admissible' : 'InstallationLimit');
    return { position: row.position, reason };
  }
}
