import type { MigrationInterface, QueryRunner } from 'typeorm';

/** A project's default registry: where builds that name no repository push their images. */
export class ProjectDefaultRegistry1764201600000 implements MigrationInterface {
  name = 'ProjectDefaultRegistry1764201600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE projects ADD COLUMN default_registry text`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE projects DROP COLUMN default_registry`);
  }
}
