import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention of finished builds (docs/adr/0050-retention.md).
 *
 * `builds.keep`: a pinned build, never deleted by retention (PUT/DELETE /builds/{id}/keep).
 *
 * `tenant_admission_settings.retention_days` and `retention_keep_last`: a tenant's own policy,
 * beside its place in admission; null inherits the installation's KILN_RETENTION_DAYS /
 * KILN_RETENTION_KEEP_LAST, 0 turns the rule off for the tenant.
 *
 * Two partial indexes over finished builds: a project's newest first (the keep-last rule skips
 * its newest N and reads on), and a tenant's by completion (the age rule reads those past the
 * cutoff).
 *
 * `retention_schedule`: one row, when a pass last started. A replica runs a pass only when it
 * moves that time on by a whole interval, so one replica runs each interval's pass, and a restart
 * neither repeats nor postpones it.
 */
export class Retention1765756800000 implements MigrationInterface {
  name = 'Retention1765756800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE builds ADD COLUMN keep boolean NOT NULL DEFAULT false');
    await runner.query(`
      ALTER TABLE tenant_admission_settings
        ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 0 AND 36500),
        ADD COLUMN retention_keep_last integer
          CHECK (retention_keep_last BETWEEN 0 AND 1000000)`);
    await runner.query(`
      CREATE INDEX builds_finished_by_project_idx
        ON builds (project_id, completed_at DESC NULLS LAST, build_number DESC)
        WHERE status IN ('success', 'failed', 'cancelled')`);
    await runner.query(`
      CREATE INDEX builds_finished_by_tenant_idx ON builds (tenant_id, completed_at)
        WHERE status IN ('success', 'failed', 'cancelled')`);
    await runner.query(`
      CREATE TABLE retention_schedule (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        last_started_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query('INSERT INTO retention_schedule DEFAULT VALUES');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE retention_schedule');
    await runner.query('DROP INDEX builds_finished_by_tenant_idx');
    await runner.query('DROP INDEX builds_finished_by_project_idx');
    await runner.query(`
      ALTER TABLE tenant_admission_settings
        DROP COLUMN retention_keep_last, DROP COLUMN retention_days`);
    await runner.query('ALTER TABLE builds DROP COLUMN keep');
  }
}
