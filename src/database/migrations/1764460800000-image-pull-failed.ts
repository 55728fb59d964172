import type { MigrationInterface, QueryRunner } from 'typeorm';

/** A builder image that cannot be pulled fails the build with its own reason: ImagePullFailed. */
export class ImagePullFailed1764460800000 implements MigrationInterface {
  name = 'ImagePullFailed1764460800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check`);
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN ('BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted',
        'PodDeleted', 'InvalidSpec', 'InternalError', 'ImagePullFailed'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`UPDATE builds SET failure_reason = 'InternalError'
      WHERE failure_reason = 'ImagePullFailed'`);
    await runner.query(`ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check`);
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN ('BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted',
        'PodDeleted', 'InvalidSpec', 'InternalError'))`);
  }
}
