import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Fixed-window request counters shared by every API replica. */
export class RateLimits1763942400000 implements MigrationInterface {
  name = 'RateLimits1763942400000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE rate_limit_windows (
        key text NOT NULL,
        window_start timestamptz NOT NULL,
        count integer NOT NULL,
        PRIMARY KEY (key, window_start)
      )`);
    await runner.query(
      `CREATE INDEX rate_limit_windows_start_idx ON rate_limit_windows (window_start)`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE rate_limit_windows');
  }
}
