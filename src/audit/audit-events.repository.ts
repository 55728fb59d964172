import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { ActorType, AuditEvent, AuditResult } from './audit-event.js';

/** What a list of events may be narrowed to; every field is optional. */
export interface AuditFilter {
  /** A tenant's events only; `null` for the installation's own (no tenant). */
  readonly tenantId?: string | null;
  readonly actorUserId?: string;
  readonly action?: string;
  readonly targetId?: string;
  readonly result?: AuditResult;
  /** Events at or after this time. */
  readonly since?: Date;
  /** Events before this time. */
  readonly until?: Date;
}

interface Row {
  id: string;
  occurred_at: Date;
  actor_type: ActorType;
  actor_user_id: string | null;
  actor_email: string | null;
  actor_token_id: string | null;
  tenant_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  result: AuditResult;
  status: number | null;
  request_id: string | null;
  source_address: string | null;
  user_agent: string | null;
}

const COLUMNS =
  'id, occurred_at, actor_type, actor_user_id, actor_email, actor_token_id, tenant_id, action, ' +
  'target_type, target_id, result, status, request_id, source_address, user_agent';

function toEvent(row: Row): AuditEvent {
  return {
    id: row.id,
    occurredAt: row.occurred_at,
    actor: {
      type: row.actor_type,
      userId: row.actor_user_id,
      email: row.actor_email,
      apiTokenId: row.actor_token_id,
    },
    tenantId: row.tenant_id,
    action: row.action,
    target: row.target_type === null ? null : { type: row.target_type, id: row.target_id },
    result: row.result,
    status: row.status,
    requestId: row.request_id,
    sourceAddress: row.source_address,
    userAgent: row.user_agent,
  };
}

/** The key of the advisory lock one replica holds while it applies the audit retention. */
const RETENTION_LOCK = 'kiln_audit_retention';

/** The `audit_events` table (migration 1765699200000). */
@Injectable()
export class AuditEventsRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insert(event: AuditEvent): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO audit_events (${COLUMNS})
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
      [
        event.id,
        event.occurredAt,
        event.actor.type,
        event.actor.userId,
        event.actor.email,
        event.actor.apiTokenId,
        event.tenantId,
        event.action,
        event.target?.type ?? null,
        event.target?.id ?? null,
        event.result,
        event.status,
        event.requestId,
        event.sourceAddress,
        event.userAgent,
      ],
    );
  }

  /** One page of the events the filter selects, newest first, and how many it selects in all. */
  async page(
    filter: AuditFilter,
    offset: number,
    limit: number,
  ): Promise<{ events: AuditEvent[]; total: number }> {
    const conditions: string[] = [];
    const values: unknown[] = [];
    const where = (sql: (placeholder: string) => string, value: unknown) => {
      values.push(value);
      conditions.push(sql(`$${values.length}`));
    };
    if (filter.tenantId === null) conditions.push('tenant_id IS NULL');
    else if (filter.tenantId !== undefined) where((p) => `tenant_id = ${p}`, filter.tenantId);
    if (filter.actorUserId !== undefined) where((p) => `actor_user_id = ${p}`, filter.actorUserId);
    if (filter.action !== undefined) where((p) => `action = ${p}`, filter.action);
    if (filter.targetId !== undefined) where((p) => `target_id = ${p}`, filter.targetId);
    if (filter.result !== undefined) where((p) => `result = ${p}`, filter.result);
    if (filter.since !== undefined) where((p) => `occurred_at >= ${p}`, filter.since);
    if (filter.until !== undefined) where((p) => `occurred_at < ${p}`, filter.until);
    const clause = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
    const [rows, counted] = await Promise.all([
      this.dataSource.query<Row[]>(
        `SELECT ${COLUMNS} FROM audit_events ${clause}
          ORDER BY occurred_at DESC, id DESC
          LIMIT $${values.length + 1} OFFSET $${values.length + 2}`,
        [...values, limit, offset],
      ),
      this.dataSource.query<Array<{ total: number }>>(
        `SELECT count(*)::int AS total FROM audit_events ${clause}`,
        values,
      ),
    ]);
    return { events: rows.map(toEvent), total: counted[0]?.total ?? 0 };
  }

  /**
   * Deletes up to `limit` of the oldest events that occurred before `cutoff`, in one short
   * transaction of its own, and answers how many it deleted.
   */
  async deleteOlderThan(cutoff: Date, limit: number): Promise<number> {
    // Through a CTE the statement is a SELECT, whose rows TypeORM answers as they are.
    const rows = await this.dataSource.query<Array<{ deleted: number }>>(
      `WITH gone AS (
         DELETE FROM audit_events WHERE id IN (
           SELECT id FROM audit_events WHERE occurred_at < $1
            ORDER BY occurred_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING 1)
       SELECT count(*)::int AS deleted FROM gone`,
      [cutoff, limit],
    );
    return rows[0]?.deleted ?? 0;
  }

  /**
   * Runs `work` while this process holds the retention's advisory lock (a session lock on a
   * connection of its own), or answers undefined at once when another replica holds it.
   */
  async whileRetentionLocked<T>(work: () => Promise<T>): Promise<T | undefined> {
    const lock = this.dataSource.createQueryRunner();
    await lock.connect();
    try {
      const [{ locked }] = (await lock.query(
        'SELECT pg_try_advisory_lock(hashtext($1)) AS locked',
        [RETENTION_LOCK],
      )) as [{ locked: boolean }];
      if (!locked) return undefined;
      try {
        return await work();
      } finally {
        await lock
          .query('SELECT pg_advisory_unlock(hashtext($1))', [RETENTION_LOCK])
          .catch(() => undefined);
      }
    } finally {
      await lock.release();
    }
  }
}
