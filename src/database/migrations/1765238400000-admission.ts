import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Admission (docs/adr/0042-admission-in-postgres.md): a started build waits in build_admissions
 * until the limits let it run; tenant_admission_settings holds each tenant's weight in the fair
 * share and its own limit on running builds.
 *
 * `seq` is the order of the queue (first started first within a tenant, and the last tie-break
 * across tenants); queued_at says when the build began to wait (how long it waited, the queue's
 * time to live). Released rows stay: a tenant's last admission is read from them.
 */
export class Admission1765238400000 implements MigrationInterface {
  name = 'Admission1765238400000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE build_admissions (
        build_id uuid PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
        tenant_id uuid NOT NULL,
        project_id uuid NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        queued_at timestamptz NOT NULL DEFAULT now(),
        admitted_at timestamptz,
        released_at timestamptz,
        reason text,
        message text
      )`);
    // Waiting builds, per tenant in the order of the queue.
    await runner.query(`
      CREATE INDEX build_admissions_waiting_idx ON build_admissions (tenant_id, seq)
        WHERE admitted_at IS NULL AND released_at IS NULL`);
    // Running builds, counted per tenant and project.
    await runner.query(`
      CREATE INDEX build_admissions_running_idx ON build_admissions (tenant_id, project_id)
        WHERE admitted_at IS NOT NULL AND released_at IS NULL`);
    // A tenant's last admission: the fair share's tie-break.
    await runner.query(`
      CREATE INDEX build_admissions_admitted_idx ON build_admissions (tenant_id, admitted_at)
        WHERE admitted_at IS NOT NULL`);
    await runner.query(`
      CREATE TABLE tenant_admission_settings (
        tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
        weight integer NOT NULL DEFAULT 1 CHECK (weight > 0),
        max_running integer CHECK (max_running >= 0),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE tenant_admission_settings');
    await runner.query('DROP TABLE build_admissions');
  }
}
