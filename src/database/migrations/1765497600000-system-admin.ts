import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Installation administrators (`system:admin`, docs/adr/0043-admin-api.md): a flag on the user,
 * never a tenant role. The bootstrap admin holds it; in an installation that existed before, the
 * first user created does (the bootstrap admin, or whoever an operator made first by hand).
 * A change of the flag is a change of access: it announces on `kiln_access` like `disabled`.
 */
export class SystemAdmin1765497600000 implements MigrationInterface {
  name = 'SystemAdmin1765497600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE users ADD COLUMN system_admin boolean NOT NULL DEFAULT false');
    await runner.query(`
      UPDATE users SET system_admin = true
       WHERE id = (SELECT id FROM users ORDER BY created_at, id LIMIT 1)`);
    await runner.query('DROP TRIGGER users_access_updated ON users');
    await runner.query(`
      CREATE TRIGGER users_access_updated AFTER UPDATE ON users
        FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                           OR OLD.system_admin IS DISTINCT FROM NEW.system_admin
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION kiln_notify_access()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TRIGGER users_access_updated ON users');
    await runner.query(`
      CREATE TRIGGER users_access_updated AFTER UPDATE ON users
        FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query('ALTER TABLE users DROP COLUMN system_admin');
  }
}
