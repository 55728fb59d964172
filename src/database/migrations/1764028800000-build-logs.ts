import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Build log lines (seq dense from 0 per build) and the per-build counters LogSink keeps. */
export class BuildLogs1764028800000 implements MigrationInterface {
  name = 'BuildLogs1764028800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE build_log_lines (
        build_id uuid NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
        seq integer NOT NULL CHECK (seq >= 0),
        ts timestamptz NOT NULL,
        level text NOT NULL CHECK (level IN ('DEBUG', 'INFO', 'WARN', 'ERROR')),
        message text NOT NULL,
        metadata jsonb,
        PRIMARY KEY (build_id, seq)
      )`);
    await runner.query(`
      ALTER TABLE builds
        ADD COLUMN log_lines integer NOT NULL DEFAULT 0,
        ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0,
        ADD COLUMN log_truncated boolean NOT NULL DEFAULT false,
        ADD COLUMN log_dropped_lines integer NOT NULL DEFAULT 0`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE build_log_lines');
    await runner.query(`ALTER TABLE builds DROP COLUMN log_lines, DROP COLUMN log_bytes,
      DROP COLUMN log_truncated, DROP COLUMN log_dropped_lines`);
  }
}
