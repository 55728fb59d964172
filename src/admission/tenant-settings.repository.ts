import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { InvalidRequestError, NotFoundError } from '../common/errors.js';

/** A tenant's place in admission: its weight in the fair share and its own limit. */
export interface TenantAdmission {
  readonly tenantId: string;
  /** Its share of the slots against other tenants' (default 1): weight 2 runs twice as many. */
  readonly weight: number;
  /** Its own limit on running builds; null: the installation's KILN_TENANT_MAX_RUNNING holds. */
  readonly maxRunning: number | null;
}

/** What a change sets; a field left out keeps its value, `maxRunning: null` restores the default. */
export interface TenantAdmissionChange {
  readonly weight?: number;
  readonly maxRunning?: number | null;
}

const MAX_WEIGHT = 1000;
const MAX_RUNNING = 100_000;

/**
 * Each tenant's admission settings (tenant_admission_settings, docs/adr/0042-admission-in-
 * postgres.md), set by installation administrators (PATCH /api/v1/tenants/{id}/admission,
 * `kiln settings admission --weight …`) and read by every admission pass.
 */
@Injectable()
export class TenantAdmissionSettings {
  constructor(private readonly dataSource: DataSource) {}

  async get(tenantId: string): Promise<TenantAdmission> {
    const [row] = await this.dataSource.query<
      Array<{ weight: number; max_running: number | null }>
    >('SELECT weight, max_running FROM tenant_admission_settings WHERE tenant_id = $1', [tenantId]);
    return { tenantId, weight: row?.weight ?? 1, maxRunning: row?.max_running ?? null };
  }

  /** Applies `change` and answers the settings now; bad values change nothing (400). */
  async set(tenantId: string, change: TenantAdmissionChange): Promise<TenantAdmission> {
    const details: Record<string, string> = {};
    const { weight, maxRunning } = change;
    if (
      weight !== undefined &&
      !(Number.isSafeInteger(weight) && weight >= 1 && weight <= MAX_WEIGHT)
    ) {
      details['weight'] = `an integer from 1 to ${MAX_WEIGHT}`;
    }
    if (
      maxRunning !== undefined &&
      maxRunning !== null &&
      !(Number.isSafeInteger(maxRunning) && maxRunning >= 0 && maxRunning <= MAX_RUNNING)
    ) {
      details['max_running'] = `an integer from 0 to ${MAX_RUNNING}, or default`;
    }
    if (Object.keys(details).length > 0) {
      throw new InvalidRequestError('Invalid admission settings', details);
    }
    const current = await this.get(tenantId);
    const next = {
      weight: weight ?? current.weight,
      maxRunning: maxRunning === undefined ? current.maxRunning : maxRunning,
    };
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO tenant_admission_settings (tenant_id, weight, max_running)
       SELECT id, $2, $3 FROM tenants WHERE id = $1
       ON CONFLICT (tenant_id) DO UPDATE
          SET weight = EXCLUDED.weight, max_running = EXCLUDED.max_running, updated_at = now()
       RETURNING tenant_id`,
      [tenantId, next.weight, next.maxRunning],
    );
    if (rows.length === 0) throw new NotFoundError('Tenant not found');
    return { tenantId, ...next };
  }
}
