import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { NotFoundError } from '../common/errors.js';
import type { GitEvent } from './git-event.js';

export const TRIGGER_PROVIDERS = ['github', 'gitlab', 'gitea', 'forgejo'] as const;
export type TriggerProvider = (typeof TRIGGER_PROVIDERS)[number];

export const TRIGGER_EVENTS = ['push', 'tag', 'pull_request'] as const;
export type TriggerEvent = (typeof TRIGGER_EVENTS)[number];

/** What a newer build of the same trigger and branch does to the older ones. */
export const TRIGGER_CONCURRENCY = ['parallel', 'serial', 'latest-only'] as const;
export type TriggerConcurrency = (typeof TRIGGER_CONCURRENCY)[number];

export const DELIVERY_OUTCOMES = [
  'pending',
  'built',
  'filtered',
  'duplicate',
  'refused',
  'failed',
] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** What a trigger builds: the reference form's build args, or a stored wizard manifest. */
export type TriggerBuild =
  | { readonly form: 'reference'; readonly build_args: Readonly<Record<string, string>> | null }
  | { readonly form: 'manifest'; readonly manifest: Readonly<Record<string, unknown>> };

/** Where the build's result is posted: the provider's API, the repository, a token reference. */
export interface StatusTargetRecord {
  readonly api_url: string;
  readonly repository: string;
  /** A secret reference (vault:, aws:, azure:), resolved by the tenant's secret manager. */
  readonly token: string;
  readonly context: string;
}

export interface TriggerRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly name: string;
  readonly provider: TriggerProvider;
  readonly events: readonly TriggerEvent[];
  readonly branches: readonly string[];
  readonly tags: readonly string[];
  readonly paths: readonly string[];
  readonly build: TriggerBuild;
  readonly start: boolean;
  readonly concurrency: TriggerConcurrency;
  readonly secretSealed: string;
  readonly pollIntervalSeconds: number | null;
  readonly pollError: string | null;
  readonly statusTarget: StatusTargetRecord | null;
  readonly enabled: boolean;
  readonly createdBy: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** The fields a trigger is made of; the secret comes sealed. */
export type TriggerFields = Omit<
  TriggerRecord,
  'id' | 'tenantId' | 'projectId' | 'pollError' | 'createdBy' | 'createdAt' | 'updatedAt'
>;

export interface DeliveryRecord {
  readonly id: string;
  readonly triggerId: string;
  readonly deliveryId: string;
  readonly event: string;
  readonly ref: string | null;
  readonly commit: string | null;
  readonly pusher: string | null;
  readonly outcome: DeliveryOutcome;
  readonly detail: string | null;
  readonly buildId: string | null;
  readonly receivedAt: Date;
}

export interface NewDelivery {
  readonly deliveryId: string;
  /** The event as kiln read it, kept while the delivery is pending (to build it after a crash). */
  readonly eventData: GitEvent | null;
  readonly event: string;
  readonly ref: string | null;
  readonly commit: string | null;
  readonly pusher: string | null;
  readonly outcome: DeliveryOutcome;
  readonly detail: string | null;
}

/** How many deliveries a trigger keeps: the newest, as the admins' list shows them. */
export const DELIVERIES_KEPT = 100;

const TRIGGER_COLUMNS = `
  id, tenant_id, project_id, name, provider, events, branches, tags, paths, build, start,
  concurrency, secret_sealed, poll_interval_seconds, poll_error, status_target, enabled,
  created_by, created_at, updated_at`;

const DELIVERY_COLUMNS = `
  id, trigger_id, delivery_id, event, ref, commit, pusher, outcome, detail, build_id, received_at`;

type Row = Record<string, unknown>;

/** How long a claimed delivery is left to its claimer before another replica builds it. */
const CLAIM_SECONDS = 120;
/** A pending delivery younger than this is still being built by the request that recorded it. */
const STALE_SECONDS = 30;

function prefixed(alias: string, columns: string): string {
  return columns
    .split(',')
    .map((column) => column.trim())
    .filter((column) => column !== '')
    .map((column) => `${alias}.${column} AS ${alias}_${column}`)
    .join(', ');
}

function unprefixed(row: Row, prefix: string): Row {
  return Object.fromEntries(
    Object.entries(row)
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, value]) => [key.slice(prefix.length), value]),
  );
}

/** The triggers, their deliveries and the refs polling saw (docs/adr/0053-triggers.md). */
@Injectable()
export class TriggersRepository {
  constructor(private readonly dataSource: DataSource) {}

  async create(
    tenantId: string,
    projectId: string,
    createdBy: string | null,
    fields: TriggerFields,
  ): Promise<TriggerRecord> {
    const rows: Row[] = await this.dataSource.query(
      `INSERT INTO triggers (tenant_id, project_id, created_by, name, provider, events, branches,
         tags, paths, build, start, concurrency, secret_sealed, poll_interval_seconds,
         next_poll_at, status_target, enabled)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
         CASE WHEN $14::integer IS NULL THEN NULL ELSE now() END, $15, $16)
       RETURNING ${TRIGGER_COLUMNS}`,
      [tenantId, projectId, createdBy, ...fieldValues(fields)],
    );
    return toTrigger(rows[0]!);
  }

  async list(tenantId: string, projectId?: string): Promise<TriggerRecord[]> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${TRIGGER_COLUMNS} FROM triggers
        WHERE tenant_id = $1 AND ($2::uuid IS NULL OR project_id = $2)
        ORDER BY created_at, id`,
      [tenantId, projectId ?? null],
    );
    return rows.map(toTrigger);
  }

  async find(tenantId: string, id: string): Promise<TriggerRecord> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${TRIGGER_COLUMNS} FROM triggers WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id],
    );
    if (rows.length === 0) throw new NotFoundError('Trigger not found');
    return toTrigger(rows[0]!);
  }

  /** Any tenant's trigger: the webhook route knows only the id in its path. */
  async findAnyTenant(id: string): Promise<TriggerRecord | undefined> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${TRIGGER_COLUMNS} FROM triggers WHERE id = $1`,
      [id],
    );
    return rows.length === 0 ? undefined : toTrigger(rows[0]!);
  }

  /**
   * Writes every field. Polling starts now when it is turned on (its first poll only records the
   * refs again), and stops when turned off.
   */
  async update(tenantId: string, id: string, fields: TriggerFields): Promise<TriggerRecord> {
    const rows: Row[] = await this.dataSource.query(
      `UPDATE triggers SET name = $3, provider = $4, events = $5, branches = $6, tags = $7,
         paths = $8, build = $9, start = $10, concurrency = $11, secret_sealed = $12,
         poll_interval_seconds = $13,
         next_poll_at = CASE WHEN $13::integer IS NULL THEN NULL
                             WHEN poll_interval_seconds IS NULL THEN now()
                             ELSE next_poll_at END,
         poll_error = CASE WHEN $13::integer IS NULL THEN NULL ELSE poll_error END,
         last_polled_at = CASE WHEN $13::integer IS NULL OR poll_interval_seconds IS NULL
                               THEN NULL ELSE last_polled_at END,
         status_target = $14, enabled = $15, updated_at = now()
       WHERE tenant_id = $1 AND id = $2
       RETURNING ${TRIGGER_COLUMNS}`,
      [tenantId, id, ...fieldValues(fields)],
    );
    const updated = (rows as unknown as [Row[], number])[0];
    if (updated.length === 0) throw new NotFoundError('Trigger not found');
    return toTrigger(updated[0]!);
  }

  async remove(tenantId: string, id: string): Promise<void> {
    const [, count] = await this.dataSource.query<[unknown, number]>(
      'DELETE FROM triggers WHERE tenant_id = $1 AND id = $2',
      [tenantId, id],
    );
    if (count === 0) throw new NotFoundError('Trigger not found');
  }

  /**
   * Records a delivery before anything is built. Undefined when the trigger has one of that id
   * already: a replay, which the caller answers without building.
   */
  async recordDelivery(
    triggerId: string,
    delivery: NewDelivery,
  ): Promise<DeliveryRecord | undefined> {
    const rows: Row[] = await this.dataSource.query(
      `INSERT INTO trigger_deliveries
         (trigger_id, delivery_id, event, ref, commit, pusher, outcome, detail, event_data)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (trigger_id, delivery_id) DO NOTHING
       RETURNING ${DELIVERY_COLUMNS}`,
      [
        triggerId,
        delivery.deliveryId,
        delivery.event,
        delivery.ref,
        delivery.commit,
        delivery.pusher,
        delivery.outcome,
        delivery.detail,
        delivery.eventData === null ? null : JSON.stringify(delivery.eventData),
      ],
    );
    if (rows.length === 0) return undefined;
    await this.pruneDeliveries(triggerId);
    return toDelivery(rows[0]!);
  }

  async findDelivery(triggerId: string, deliveryId: string): Promise<DeliveryRecord | undefined> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${DELIVERY_COLUMNS} FROM trigger_deliveries
        WHERE trigger_id = $1 AND delivery_id = $2`,
      [triggerId, deliveryId],
    );
    return rows.length === 0 ? undefined : toDelivery(rows[0]!);
  }

  /** What became of a delivery once its build was made, or was not. */
  async settleDelivery(
    id: string,
    outcome: DeliveryOutcome,
    detail: string | null,
    buildId: string | null,
  ): Promise<void> {
    await this.dataSource.query(
      `UPDATE trigger_deliveries SET outcome = $2, detail = $3, build_id = $4, event_data = NULL
        WHERE id = $1`,
      [id, outcome, detail, buildId],
    );
  }

  /**
   * Takes a pending delivery to build it: true for the one caller that gets it, or for a replica
   * that finds it claimed long ago by one that stopped.
   */
  async claimDelivery(id: string): Promise<boolean> {
    const [, count] = await this.dataSource.query<[unknown, number]>(
      `UPDATE trigger_deliveries SET claimed_at = now()
        WHERE id = $1 AND outcome = 'pending'
          AND (claimed_at IS NULL OR claimed_at < now() - interval '${CLAIM_SECONDS} seconds')`,
      [id],
    );
    return count === 1;
  }

  /** Gives a claimed delivery back, to be built on a later pass. */
  async releaseDelivery(id: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE trigger_deliveries SET claimed_at = NULL WHERE id = $1 AND outcome = 'pending'`,
      [id],
    );
  }

  /** Pending deliveries nobody is building: recorded before a crash, or given back. */
  async unbuiltDeliveries(
    limit: number,
  ): Promise<Array<{ trigger: TriggerRecord; delivery: DeliveryRecord; event: GitEvent }>> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${prefixed('t', TRIGGER_COLUMNS)}, d.id AS d_id, d.trigger_id AS d_trigger_id,
              d.delivery_id AS d_delivery_id, d.event AS d_event, d.ref AS d_ref,
              d.commit AS d_commit, d.pusher AS d_pusher, d.outcome AS d_outcome,
              d.detail AS d_detail, d.build_id AS d_build_id, d.received_at AS d_received_at,
              d.event_data AS d_event_data
         FROM trigger_deliveries d JOIN triggers t ON t.id = d.trigger_id
        WHERE d.outcome = 'pending' AND d.event_data IS NOT NULL
          AND d.received_at < now() - interval '${STALE_SECONDS} seconds'
          AND (d.claimed_at IS NULL OR d.claimed_at < now() - interval '${CLAIM_SECONDS} seconds')
        ORDER BY d.received_at LIMIT $1`,
      [limit],
    );
    return rows.map((row) => ({
      trigger: toTrigger(unprefixed(row, 't_')),
      delivery: toDelivery(unprefixed(row, 'd_')),
      event: row.d_event_data as GitEvent,
    }));
  }

  /** Runs `work` while holding a lock every replica honours (a transaction-scoped advisory lock). */
  withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [key]);
      return work();
    });
  }

  /** A trigger's queued and running builds of one branch, oldest first. */
  async activeBuilds(
    triggerId: string,
    branch: string,
  ): Promise<Array<{ id: string; buildNumber: number; status: 'queued' | 'in_progress' }>> {
    const rows: Array<{ id: string; build_number: number; status: 'queued' | 'in_progress' }> =
      await this.dataSource.query(
        `SELECT id, build_number, status FROM builds
          WHERE trigger_id = $1 AND git_branch = $2 AND status IN ('queued', 'in_progress')
          ORDER BY build_number`,
        [triggerId, branch],
      );
    return rows.map((row) => ({ id: row.id, buildNumber: row.build_number, status: row.status }));
  }

  /** Branches of triggers that start their builds where a build still waits to be started. */
  async branchesWithQueuedBuilds(
    limit: number,
  ): Promise<Array<{ trigger: TriggerRecord; branch: string }>> {
    const rows: Row[] = await this.dataSource.query(
      `SELECT DISTINCT ${prefixed('t', TRIGGER_COLUMNS)}, b.git_branch AS b_branch
         FROM builds b JOIN triggers t ON t.id = b.trigger_id
        WHERE b.trigger_id IS NOT NULL AND b.status = 'queued' AND t.start AND t.enabled
        LIMIT $1`,
      [limit],
    );
    return rows.map((row) => ({
      trigger: toTrigger(unprefixed(row, 't_')),
      branch: row.b_branch as string,
    }));
  }

  /** A build whose trigger posts no commit status: nothing is ever due for it. */
  async markNoStatus(buildId: string): Promise<void> {
    await this.dataSource.query(`UPDATE builds SET status_posted = 'none' WHERE id = $1`, [
      buildId,
    ]);
  }

  /** A trigger's newest deliveries first. */
  async deliveries(tenantId: string, triggerId: string): Promise<DeliveryRecord[]> {
    await this.find(tenantId, triggerId);
    const rows: Row[] = await this.dataSource.query(
      `SELECT ${DELIVERY_COLUMNS} FROM trigger_deliveries WHERE trigger_id = $1
        ORDER BY received_at DESC, id LIMIT ${DELIVERIES_KEPT}`,
      [triggerId],
    );
    return rows.map(toDelivery);
  }

  /**
   * Keeps a trigger's newest DELIVERIES_KEPT deliveries. Older ids are forgotten: a provider
   * redelivers within hours, and a trigger that received 100 deliveries since is past that.
   */
  private async pruneDeliveries(triggerId: string): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM trigger_deliveries WHERE trigger_id = $1 AND id IN (
         SELECT id FROM trigger_deliveries WHERE trigger_id = $1
          ORDER BY received_at DESC, id OFFSET ${DELIVERIES_KEPT * 2})`,
      [triggerId],
    );
  }
}

function fieldValues(fields: TriggerFields): unknown[] {
  return [
    fields.name,
    fields.provider,
    fields.events,
    fields.branches,
    fields.tags,
    fields.paths,
    JSON.stringify(fields.build),
    fields.start,
    fields.concurrency,
    fields.secretSealed,
    fields.pollIntervalSeconds,
    fields.statusTarget === null ? null : JSON.stringify(fields.statusTarget),
    fields.enabled,
  ];
}

export function toTrigger(row: Row): TriggerRecord {
  return {
    id: row.id as string,
    tenantId: row.tenant_id as string,
    projectId: row.project_id as string,
    name: row.name as string,
    provider: row.provider as TriggerProvider,
    events: row.events as TriggerEvent[],
    branches: row.branches as string[],
    tags: row.tags as string[],
    paths: row.paths as string[],
    build: row.build as TriggerBuild,
    start: row.start as boolean,
    concurrency: row.concurrency as TriggerConcurrency,
    secretSealed: row.secret_sealed as string,
    pollIntervalSeconds: row.poll_interval_seconds as number | null,
    pollError: row.poll_error as string | null,
    statusTarget: row.status_target as StatusTargetRecord | null,
    enabled: row.enabled as boolean,
    createdBy: row.created_by as string | null,
    createdAt: row.created_at as Date,
    updatedAt: row.updated_at as Date,
  };
}

function toDelivery(row: Row): DeliveryRecord {
  return {
    id: row.id as string,
    triggerId: row.trigger_id as string,
    deliveryId: row.delivery_id as string,
    event: row.event as string,
    ref: row.ref as string | null,
    commit: row.commit as string | null,
    pusher: row.pusher as string | null,
    outcome: row.outcome as DeliveryOutcome,
    detail: row.detail as string | null,
    buildId: row.build_id as string | null,
    receivedAt: row.received_at as Date,
  };
}
