import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A failed build has at most one active (queued or running) retry, whatever its form: the unique
 * index makes concurrent retries race on the insert, and exactly one wins.
 */
export class ActiveRetry1764115200000 implements MigrationInterface {
  name = 'ActiveRetry1764115200000';

  async up(runner: QueryRunner): Promise<void> {
    const clashes = (await runner.query(`
      SELECT retry_of, string_agg(id::text, ', ' ORDER BY created_at) AS builds FROM builds
       WHERE retry_of IS NOT NULL AND status IN ('queued', 'in_progress')
       GROUP BY retry_of HAVING count(*) > 1`)) as Array<{ retry_of: string; builds: string }>;
    if (clashes.length > 0) {
      // Refuse rather than choose for the user which of their builds to drop.
      throw new Error(
        'these failed builds have more than one queued or running retry; delete or let finish ' +
          `all but one of each before upgrading: ${clashes
            .map((clash) => `${clash.retry_of} → ${clash.builds}`)
            .join('; ')}`,
      );
    }
    await runner.query(`
      CREATE UNIQUE INDEX builds_active_retry_key ON builds (retry_of)
        WHERE retry_of IS NOT NULL AND status IN ('queued', 'in_progress')`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP INDEX builds_active_retry_key');
  }
}
