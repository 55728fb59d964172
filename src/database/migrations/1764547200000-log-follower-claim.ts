import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Which operator process follows a build's pod logs, until when: two operators that both believe
 * they lead (a Lease misconfigured, clocks apart) must not store each line twice.
 */
export class LogFollowerClaim1764547200000 implements MigrationInterface {
  name = 'LogFollowerClaim1764547200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE build_logs
      ADD COLUMN follower text, ADD COLUMN follower_until timestamptz`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE build_logs DROP COLUMN follower, DROP COLUMN follower_until');
  }
}
