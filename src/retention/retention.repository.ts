import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { BuildSpec } from '../manifest/build-spec.js';
import { NotFoundError } from '../common/errors.js';

/** Why a build goes: older than the days (`age`), or past the newest N of its project (`count`). */
export const RETENTION_RULES = ['age', 'count'] as const;
export type RetentionRule = (typeof RETENTION_RULES)[number];

/** A policy's two rules; 0 turns a rule off. */
export interface RetentionPolicy {
  readonly days: number;
  readonly keepLast: number;
}

/** A tenant's own values; null inherits the installation's. */
export interface TenantRetention {
  readonly tenantId: string;
  readonly days: number | null;
  readonly keepLast: number | null;
}

/** What a change sets; a field left out keeps its value, null inherits again. */
export interface TenantRetentionChange {
  readonly days?: number | null;
  readonly keepLast?: number | null;
}

/** A build the policy deletes, as the preview lists it. */
export interface DoomedBuild {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly buildNumber: number;
  readonly completedAt: Date | null;
  readonly rule: RetentionRule;
}

/** A build a pass deleted: what the runner needs to remove what it keeps, and the rule. */
export interface DeletedBuild {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly buildNumber: number;
  readonly spec: BuildSpec;
  readonly cancelReason: string | null;
  readonly rule: RetentionRule;
}

const FINISHED = `('success', 'failed', 'cancelled')`;

/**
 * The builds the policy deletes now ($1 the installation's days, $2 its keep-last, $3 one tenant
 * or null for all), as the CTE `eligible` (id, tenant_id, project_id, build_number, completed_at,
 * rule). Only finished builds, never a pinned one, nor a failed build while a retry of it is
 * queued or running. `count` counts every finished build of the project, pinned or not: the
 * newest N stay, and pinned ones older than them stay too. A build both rules take is `age`'s.
 */
const ELIGIBLE = `
  WITH policy AS (
    SELECT t.id AS tenant_id,
           COALESCE(s.retention_days, $1::int) AS days,
           COALESCE(s.retention_keep_last, $2::int) AS keep_last
      FROM tenants t LEFT JOIN tenant_admission_settings s ON s.tenant_id = t.id
     WHERE $3::uuid IS NULL OR t.id = $3::uuid
  ), by_rule AS (
    SELECT b.id, 'age' AS rule
      FROM policy p JOIN builds b ON b.tenant_id = p.tenant_id
     WHERE p.days > 0 AND b.status IN ${FINISHED}
       AND b.completed_at < now() - make_interval(days => p.days)
    UNION ALL
    SELECT old.id, 'count'
      FROM policy p JOIN projects pr ON pr.tenant_id = p.tenant_id
     CROSS JOIN LATERAL (
       SELECT b.id FROM builds b
        WHERE b.project_id = pr.id AND b.status IN ${FINISHED}
        ORDER BY b.completed_at DESC NULLS LAST, b.build_number DESC
       OFFSET p.keep_last) old
     WHERE p.keep_last > 0
  ), doomed AS (
    SELECT DISTINCT ON (id) id, rule FROM by_rule ORDER BY id, rule
  ), eligible AS (
    SELECT b.id, b.tenant_id, b.project_id, b.build_number, b.completed_at, d.rule
      FROM doomed d JOIN builds b ON b.id = d.id
     WHERE NOT b.keep AND b.status IN ${FINISHED}
       AND NOT EXISTS (SELECT 1 FROM builds r
                        WHERE r.retry_of = b.id AND r.status IN ('queued', 'in_progress'))
  )`;

interface EligibleRow {
  id: string;
  tenant_id: string;
  project_id: string;
  build_number: number;
  completed_at: Date | null;
  rule: RetentionRule;
}

/**
 * Retention's records (migration Retention1765756800000): each tenant's policy, beside its
 * admission settings; the pass schedule; and the statements that find and delete the builds the
 * policy says go (docs/adr/0050-retention.md).
 */
@Injectable()
export class RetentionRepository {
  constructor(private readonly dataSource: DataSource) {}

  async tenantPolicy(tenantId: string): Promise<TenantRetention> {
    const [row] = await this.dataSource.query<
      Array<{ retention_days: number | null; retention_keep_last: number | null }>
    >(
      `SELECT retention_days, retention_keep_last FROM tenant_admission_settings
        WHERE tenant_id = $1`,
      [tenantId],
    );
    return {
      tenantId,
      days: row?.retention_days ?? null,
      keepLast: row?.retention_keep_last ?? null,
    };
  }

  /** Applies `change` (values already checked) and answers the tenant's values now. */
  async setTenantPolicy(tenantId: string, change: TenantRetentionChange): Promise<TenantRetention> {
    const rows = await this.dataSource.query<
      Array<{ retention_days: number | null; retention_keep_last: number | null }>
    >(
      `INSERT INTO tenant_admission_settings (tenant_id, retention_days, retention_keep_last)
       SELECT id, $3, $5 FROM tenants WHERE id = $1
       ON CONFLICT (tenant_id) DO UPDATE SET
         retention_days = CASE WHEN $2 THEN EXCLUDED.retention_days
                               ELSE tenant_admission_settings.retention_days END,
         retention_keep_last = CASE WHEN $4 THEN EXCLUDED.retention_keep_last
                                    ELSE tenant_admission_settings.retention_keep_last END,
         updated_at = now()
       RETURNING retention_days, retention_keep_last`,
      [
        tenantId,
        change.days !== undefined,
        change.days ?? null,
        change.keepLast !== undefined,
        change.keepLast ?? null,
      ],
    );
    const [row] = rows;
    if (row === undefined) throw new NotFoundError('Tenant not found');
    return { tenantId, days: row.retention_days, keepLast: row.retention_keep_last };
  }

  /**
   * Starts this interval's pass if no replica has: true when this call moved the schedule on.
   * One statement, so of replicas asking together exactly one wins.
   */
  async claimPass(intervalMs: number): Promise<boolean> {
    // TypeORM answers an UPDATE with [rows, affected].
    const [rows] = await this.dataSource.query<[unknown[], number]>(
      `UPDATE retention_schedule SET last_started_at = now()
        WHERE last_started_at <= now() - make_interval(secs => $1::double precision / 1000)
        RETURNING 1`,
      [intervalMs],
    );
    return rows.length === 1;
  }

  /** How many builds each rule deletes now, and the first `limit` of them, oldest first. */
  async preview(
    installation: RetentionPolicy,
    tenantId: string | undefined,
    limit: number,
  ): Promise<{ counts: Record<RetentionRule, number>; builds: DoomedBuild[] }> {
    const params = [installation.days, installation.keepLast, tenantId ?? null];
    // One snapshot: the counts and the list agree.
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const counted = await manager.query<Array<{ rule: RetentionRule; n: number }>>(
        `${ELIGIBLE} SELECT rule, count(*)::int AS n FROM eligible GROUP BY rule`,
        params,
      );
      const rows = await manager.query<EligibleRow[]>(
        `${ELIGIBLE} SELECT * FROM eligible ORDER BY completed_at, id LIMIT $4`,
        [...params, limit],
      );
      const counts: Record<RetentionRule, number> = { age: 0, count: 0 };
      for (const { rule, n } of counted) counts[rule] = n;
      return {
        counts,
        builds: rows.map((row) => ({
          id: row.id,
          tenantId: row.tenant_id,
          projectId: row.project_id,
          buildNumber: row.build_number,
          completedAt: row.completed_at,
          rule: row.rule,
        })),
      };
    });
  }

  /**
   * Deletes up to `limit` of the builds the policy deletes now, oldest first, in one statement
   * (one transaction), as DELETE /builds/{id} deletes one: the row goes, the purge trigger records
   * it for LogPurger (its lines go in batches behind it), its artifacts, upload tokens, counters
   * and admission row go by cascade. Rows another transaction holds (a replica's batch, a pin
   * being written) are skipped, never waited for: what one replica deletes no other does. The
   * claim re-checks `keep` and the status on the row it locks, so a pin committed meanwhile wins.
   */
  async deleteBatch(installation: RetentionPolicy, limit: number): Promise<DeletedBuild[]> {
    // TypeORM answers a DELETE with [rows, affected].
    const [rows] = await this.dataSource.query<
      [
        Array<{
          id: string;
          tenant_id: string;
          project_id: string;
          build_number: number;
          spec: BuildSpec;
          cancel_reason: string | null;
          rule: RetentionRule;
        }>,
        number,
      ]
    >(
      `${ELIGIBLE}, claimed AS (
         SELECT b.id, e.rule FROM eligible e JOIN builds b ON b.id = e.id
          WHERE NOT b.keep AND b.status IN ${FINISHED}
          ORDER BY e.completed_at, e.id LIMIT $4
            FOR UPDATE OF b SKIP LOCKED)
       DELETE FROM builds b USING claimed c WHERE b.id = c.id
       RETURNING b.id, b.tenant_id, b.project_id, b.build_number, b.spec, b.cancel_reason, c.rule`,
      [installation.days, installation.keepLast, null, limit],
    );
    return rows.map((row) => ({
      id: row.id,
      tenantId: row.tenant_id,
      projectId: row.project_id,
      buildNumber: row.build_number,
      spec: row.spec,
      cancelReason: row.cancel_reason,
      rule: row.rule,
    }));
  }
}
