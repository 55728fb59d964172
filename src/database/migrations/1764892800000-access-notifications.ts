import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Triggers that announce on `kiln_access` (ACCESS_CHANNEL in src/database/channels.ts, written out
 * here so this migration never changes) every change to what decides a user's access: a
 * membership added, re-roled or removed, and a user created, enabled or disabled, or deleted.
 * Deleting a tenant or a user removes its memberships through ON DELETE CASCADE, which fires the
 * memberships trigger row by row; a TRUNCATE announces `*`. API replicas cache access for a few
 * seconds and drop a user's entries on the notification (docs/adr/0025-hot-path-round-trips.md).
 * Triggers rather than application code, because the CLI and psql write these tables too.
 * Postgres sends one notification per distinct payload per transaction, after it commits.
 */
export class AccessNotifications1764892800000 implements MigrationInterface {
  name = 'AccessNotifications1764892800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION kiln_notify_access() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_LEVEL = 'STATEMENT' THEN
          PERFORM pg_notify('kiln_access', '*');
        ELSIF TG_TABLE_NAME = 'memberships' THEN
          IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('kiln_access', OLD.user_id::text); END IF;
          IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('kiln_access', NEW.user_id::text); END IF;
        ELSE
          IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('kiln_access', OLD.id::text); END IF;
          IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('kiln_access', NEW.id::text); END IF;
        END IF;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE TRIGGER memberships_access_changed AFTER INSERT OR DELETE ON memberships
        FOR EACH ROW EXECUTE FUNCTION kiln_notify_access()`);
    // An upsert that keeps the role (a repeated `kiln member add`) changes nothing: no news.
    await runner.query(`
      CREATE TRIGGER memberships_access_updated AFTER UPDATE ON memberships
        FOR EACH ROW WHEN (OLD.role IS DISTINCT FROM NEW.role
                           OR OLD.user_id IS DISTINCT FROM NEW.user_id
                           OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
        EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query(`
      CREATE TRIGGER users_access_changed AFTER INSERT OR DELETE ON users
        FOR EACH ROW EXECUTE FUNCTION kiln_notify_access()`);
    // A password change or a login's rehash leaves access as it was.
    await runner.query(`
      CREATE TRIGGER users_access_updated AFTER UPDATE ON users
        FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION kiln_notify_access()`);
    for (const table of ['memberships', 'users']) {
      await runner.query(`
        CREATE TRIGGER ${table}_access_truncated AFTER TRUNCATE ON ${table}
          FOR EACH STATEMENT EXECUTE FUNCTION kiln_notify_access()`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of ['memberships', 'users']) {
      for (const suffix of ['changed', 'updated', 'truncated'])
        await runner.query(`DROP TRIGGER ${table}_access_${suffix} ON ${table}`);
    }
    await runner.query('DROP FUNCTION kiln_notify_access()');
  }
}
