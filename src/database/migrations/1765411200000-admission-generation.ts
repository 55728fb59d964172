import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The queue's generation (docs/adr/0042-admission-in-postgres.md): a sequence that every change
 * to what orders the waiting builds advances (a build that begins to wait, is admitted or
 * released, a row deleted or the table truncated, a tenant's weight or limit set). A process that ordered the queue
 * answers the places of waiting builds from that order while the generation stays the same,
 * instead of ordering 10,000 rows for each GET …/status. A reason written (reason, message)
 * orders nothing: it leaves the generation alone.
 *
 * A sequence, not a counted row: nextval takes no lock, so concurrent starts never queue behind
 * one row. It is not transactional; a reader bounds by age what that can leave stale.
 */
export class AdmissionGeneration1765411200000 implements MigrationInterface {
  name = 'AdmissionGeneration1765411200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('CREATE SEQUENCE admission_generation');
    await runner.query(`
      CREATE FUNCTION admission_generation_advance() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM nextval('admission_generation');
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE TRIGGER build_admissions_generation_rows
        AFTER INSERT OR DELETE ON build_admissions
        FOR EACH ROW EXECUTE FUNCTION admission_generation_advance()`);
    await runner.query(`
      CREATE TRIGGER build_admissions_generation_truncate
        AFTER TRUNCATE ON build_admissions
        FOR EACH STATEMENT EXECUTE FUNCTION admission_generation_advance()`);
    await runner.query(`
      CREATE TRIGGER build_admissions_generation_order
        AFTER UPDATE ON build_admissions
        FOR EACH ROW
        WHEN ((OLD.tenant_id, OLD.project_id, OLD.seq, OLD.queued_at, OLD.admitted_at,
               OLD.released_at)
              IS DISTINCT FROM
              (NEW.tenant_id, NEW.project_id, NEW.seq, NEW.queued_at, NEW.admitted_at,
               NEW.released_at))
        EXECUTE FUNCTION admission_generation_advance()`);
    await runner.query(`
      CREATE TRIGGER tenant_admission_settings_generation
        AFTER INSERT OR UPDATE OR DELETE ON tenant_admission_settings
        FOR EACH ROW EXECUTE FUNCTION admission_generation_advance()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(
      'DROP TRIGGER tenant_admission_settings_generation ON tenant_admission_settings',
    );
    await runner.query('DROP TRIGGER build_admissions_generation_order ON build_admissions');
    await runner.query('DROP TRIGGER build_admissions_generation_truncate ON build_admissions');
    await runner.query('DROP TRIGGER build_admissions_generation_rows ON build_admissions');
    await runner.query('DROP FUNCTION admission_generation_advance()');
    await runner.query('DROP SEQUENCE admission_generation');
  }
}
