import type { DataSource } from 'typeorm';
import { AdmissionStore } from '../../src/admission/admission.repository.js';
import type { AdmissionSnapshot, TenantShare } from '../../src/admission/fair-share.js';
import { createDataSource } from '../../src/database/data-source.js';
import { createTestDatabase } from './database.js';
import { LogCapture } from './log-capture.js';

/**
 * The ground of admission's medium tests: a fresh migrated database and `processes` stores on it,
 * each with a pool of its own (as separate kiln processes sharing one Postgres would be).
 */
export interface AdmissionGround {
  readonly dataSource: DataSource;
  /** One store per process; stores[0] uses `dataSource`. */
  readonly stores: readonly AdmissionStore[];
  newTenant(
    name: string,
    settings?: { weight?: number; maxRunning?: number | null },
  ): Promise<string>;
  newProject(tenantId: string, name: string): Promise<string>;
  /** Inserts a build of the project (started: in_progress) and answers its id. */
  newBuild(tenantId: string, projectId: string): Promise<string>;
  /** Admission's state as the pure rule reads it. */
  snapshot(): Promise<AdmissionSnapshot>;
  /** Running builds per tenant, per project and in all. */
  running(): Promise<{
    total: number;
    tenants: Map<string, number>;
    projects: Map<string, number>;
  }>;
  /** Forgets every build, tenant and setting. */
  clear(): Promise<void>;
  close(): Promise<void>;
}

export async function admissionGround(processes = 1): Promise<AdmissionGround> {
  const database = await createTestDatabase();
  const logger = new LogCapture().logger;
  const dataSources = await Promise.all(
    Array.from({ length: processes }, () =>
      createDataSource({ url: database.url, logger, entities: [], poolSize: 3 }).initialize(),
    ),
  );
  const dataSource = dataSources[0]!;
  let buildNumber = 0;

  return {
    dataSource,
    stores: dataSources.map((ds) => new AdmissionStore(ds)),
    async newTenant(name, settings) {
      const [{ id }] = await dataSource.query<[{ id: string }]>(
        'INSERT INTO tenants (name) VALUES ($1) RETURNING id',
        [name],
      );
      if (settings !== undefined) {
        await dataSource.query(
          `INSERT INTO tenant_admission_settings (tenant_id, weight, max_running)
           VALUES ($1, $2, $3)`,
          [id, settings.weight ?? 1, settings.maxRunning ?? null],
        );
      }
      return id;
    },
    async newProject(tenantId, name) {
      const [{ id }] = await dataSource.query<[{ id: string }]>(
        'INSERT INTO projects (tenant_id, name) VALUES ($1, $2) RETURNING id',
        [tenantId, name],
      );
      return id;
    },
    async newBuild(tenantId, projectId) {
      const [{ id }] = await dataSource.query<[{ id: string }]>(
        `INSERT INTO builds (tenant_id, project_id, build_number, status, config, spec)
         VALUES ($1, $2, $3, 'in_progress', '{}', '{}') RETURNING id`,
        [tenantId, projectId, ++buildNumber],
      );
      return id;
    },
    async snapshot() {
      const rows = await dataSource.query<
        Array<{
          build_id: string;
          tenant_id: string;
          project_id: string;
          seq: string;
          admitted: boolean;
        }>
      >(
        `SELECT build_id, tenant_id, project_id, seq::text, admitted_at IS NOT NULL AS admitted
           FROM build_admissions WHERE released_at IS NULL`,
      );
      const shares = await dataSource.query<
        Array<{
          tenant_id: string;
          weight: number;
          max_running: number | null;
          last: string | null;
        }>
      >(
        `SELECT t.id AS tenant_id, coalesce(s.weight, 1) AS weight, s.max_running,
                (SELECT (extract(epoch FROM max(a.admitted_at)) * 1000000)::int8::text
                   FROM build_admissions a WHERE a.tenant_id = t.id) AS last
           FROM tenants t LEFT JOIN tenant_admission_settings s ON s.tenant_id = t.id`,
      );
      return {
        waiting: rows
          .filter((row) => !row.admitted)
          .map((row) => ({
            buildId: row.build_id,
            tenantId: row.tenant_id,
            projectId: row.project_id,
            seq: Number(row.seq),
          })),
        running: rows
          .filter((row) => row.admitted)
          .map((row) => ({ tenantId: row.tenant_id, projectId: row.project_id })),
        tenants: new Map<string, TenantShare>(
          shares.map((row) => [
            row.tenant_id,
            {
              weight: row.weight,
              maxRunning: row.max_running,
              lastAdmitted: row.last === null ? null : Number(row.last),
            },
          ]),
        ),
      };
    },
    async running() {
      const rows = await dataSource.query<
        Array<{ tenant_id: string; project_id: string; n: number }>
      >(
        `SELECT tenant_id, project_id, count(*)::int AS n FROM build_admissions
          WHERE admitted_at IS NOT NULL AND released_at IS NULL GROUP BY tenant_id, project_id`,
      );
      const tenants = new Map<string, number>();
      const projects = new Map<string, number>();
      let total = 0;
      for (const row of rows) {
        total += row.n;
        tenants.set(row.tenant_id, (tenants.get(row.tenant_id) ?? 0) + row.n);
        projects.set(row.project_id, row.n);
      }
      return { total, tenants, projects };
    },
    async clear() {
      // Cascades to projects, builds, admissions and settings.
      await dataSource.query('DELETE FROM tenants');
    },
    async close() {
      await Promise.all(dataSources.map((ds) => ds.destroy()));
      await database.drop();
    },
  };
}
