import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A deleted build's lines leave in batches, after the build (docs/adr/0027-log-purge.md).
 *
 * Until now `build_log_lines` followed `builds` by ON DELETE CASCADE, so deleting a build removed
 * all its lines in the deleting transaction: 43.5 s for a 2,000,000-line build in a table of 100
 * million, stalling other builds' appends and pages meanwhile. Now the build row goes at once
 * (with its `build_logs` counters, still by cascade) and a trigger records its id in
 * `build_log_purges`, whatever deleted it (the API, a cascade from its project or tenant, psql).
 * LogPurger then deletes the lines `next_seq` on, a batch per transaction.
 *
 * Without the foreign key the database no longer refuses lines of a missing build; LogSink's
 * append still cannot store any: it upserts the build's `build_logs` row first, whose key
 * references `builds`, in the same transaction as the lines. So an append either commits before
 * the build's delete (which waits for its row lock) and its lines are purged, or fails.
 */
export class BuildLogPurges1764979200000 implements MigrationInterface {
  name = 'BuildLogPurges1764979200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE build_log_purges (
        build_id uuid PRIMARY KEY,
        deleted_at timestamptz NOT NULL DEFAULT now(),
        next_seq bigint NOT NULL DEFAULT 0
      )`);
    await runner.query('CREATE INDEX build_log_purges_deleted_at ON build_log_purges (deleted_at)');
    // One statement-level trigger: a project's delete cascading to 10,000 builds is one INSERT.
    await runner.query(`
      CREATE FUNCTION kiln_purge_build_logs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO build_log_purges (build_id) SELECT id FROM deleted ON CONFLICT DO NOTHING;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE TRIGGER builds_purge_logs AFTER DELETE ON builds
        REFERENCING OLD TABLE AS deleted
        FOR EACH STATEMENT EXECUTE FUNCTION kiln_purge_build_logs()`);
    await runner.query('ALTER TABLE build_log_lines DROP CONSTRAINT build_log_lines_build_id_fkey');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`
      DELETE FROM build_log_lines l WHERE NOT EXISTS (SELECT 1 FROM builds b WHERE b.id = l.build_id)`);
    await runner.query(`
      ALTER TABLE build_log_lines ADD CONSTRAINT build_log_lines_build_id_fkey
        FOREIGN KEY (build_id) REFERENCES builds (id) ON DELETE CASCADE`);
    await runner.query('DROP TRIGGER builds_purge_logs ON builds');
    await runner.query('DROP FUNCTION kiln_purge_build_logs()');
    await runner.query('DROP TABLE build_log_purges');
  }
}
