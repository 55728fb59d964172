import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A build's log counters move out of `builds` into `build_logs`, a table the log store owns:
 * lifecycle is the one writer of `builds`, and an append no longer locks the build's row (status
 * changes do not wait for log writes). One row per build that has printed something.
 */
export class BuildLogCounters1764374400000 implements MigrationInterface {
  name = 'BuildLogCounters1764374400000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE build_logs (
        build_id uuid PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
        lines integer NOT NULL DEFAULT 0,
        bytes bigint NOT NULL DEFAULT 0,
        truncated boolean NOT NULL DEFAULT false,
        dropped_lines integer NOT NULL DEFAULT 0
      )`);
    await runner.query(`
      INSERT INTO build_logs (build_id, lines, bytes, truncated, dropped_lines)
      SELECT id, log_lines, log_bytes, log_truncated, log_dropped_lines FROM builds
       WHERE log_lines > 0 OR log_dropped_lines > 0 OR log_truncated`);
    await runner.query(`ALTER TABLE builds DROP COLUMN log_lines, DROP COLUMN log_bytes,
      DROP COLUMN log_truncated, DROP COLUMN log_dropped_lines`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE builds
        ADD COLUMN log_lines integer NOT NULL DEFAULT 0,
        ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0,
        ADD COLUMN log_truncated boolean NOT NULL DEFAULT false,
        ADD COLUMN log_dropped_lines integer NOT NULL DEFAULT 0`);
    await runner.query(`
      UPDATE builds b SET log_lines = l.lines, log_bytes = l.bytes, log_truncated = l.truncated,
             log_dropped_lines = l.dropped_lines
        FROM build_logs l WHERE l.build_id = b.id`);
    await runner.query('DROP TABLE build_logs');
  }
}
