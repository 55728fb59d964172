import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * API tokens and password changes (docs/adr/0044-api-tokens.md).
 *
 * `api_tokens`: a bearer credential for machines and CI, scoped to one tenant and a subset of its
 * creator's permissions there, stored as the SHA-256 of the token (never the token). Revoking is
 * deleting the row; deleting the user or the tenant deletes its tokens.
 *
 * `users.credentials_changed_at`: when the user last changed its password, in whole seconds.
 * Access tokens issued before it are refused.
 *
 * Both are changes of access and announce on `kiln_access` with the user's id, like a disabled
 * user: a revoked token is refused on every replica as soon as the notification arrives.
 * `kiln_notify_access` learns the `user_id` column of `api_tokens`; `last_used_at` is not news.
 */
export class ApiTokens1765584000000 implements MigrationInterface {
  name = 'ApiTokens1765584000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE users ADD COLUMN credentials_changed_at timestamptz');
    await runner.query(`
      CREATE TABLE api_tokens (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
        token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
        permissions text[] NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        last_used_at timestamptz
      )`);
    await runner.query(
      'CREATE INDEX api_tokens_by_owner ON api_tokens (tenant_id, user_id, created_at)',
    );
    await runner.query(NOTIFY_ACCESS_WITH_TOKENS);
    await runner.query(`
      CREATE TRIGGER api_tokens_access_changed AFTER DELETE ON api_tokens
        FOR EACH ROW EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query(`
      CREATE TRIGGER api_tokens_access_updated AFTER UPDATE ON api_tokens
        FOR EACH ROW WHEN (OLD.token_hash IS DISTINCT FROM NEW.token_hash
                           OR OLD.permissions IS DISTINCT FROM NEW.permissions
                           OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
                           OR OLD.user_id IS DISTINCT FROM NEW.user_id
                           OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
        EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query(`
      CREATE TRIGGER api_tokens_access_truncated AFTER TRUNCATE ON api_tokens
        FOR EACH STATEMENT EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query('DROP TRIGGER users_access_updated ON users');
    await runner.query(`
      CREATE TRIGGER users_access_updated AFTER UPDATE ON users
        FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                           OR OLD.system_admin IS DISTINCT FROM NEW.system_admin
                           OR OLD.credentials_changed_at IS DISTINCT FROM NEW.credentials_changed_at
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION kiln_notify_access()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TRIGGER users_access_updated ON users');
    await runner.query(`
      CREATE TRIGGER users_access_updated AFTER UPDATE ON users
        FOR EACH ROW WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                           OR OLD.system_admin IS DISTINCT FROM NEW.system_admin
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION kiln_notify_access()`);
    await runner.query('DROP TABLE api_tokens');
    await runner.query(NOTIFY_ACCESS_BEFORE);
    await runner.query('ALTER TABLE users DROP COLUMN credentials_changed_at');
  }
}

/** The function as 1764892800000-access-notifications made it. */
const NOTIFY_ACCESS_BEFORE = `
  CREATE OR REPLACE FUNCTION kiln_notify_access() RETURNS trigger LANGUAGE plpgsql AS $$
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
  END $$`;

/** The same, with `api_tokens` announcing its `user_id` as `memberships` does. */
const NOTIFY_ACCESS_WITH_TOKENS = NOTIFY_ACCESS_BEFORE.replace(
  "TG_TABLE_NAME = 'memberships'",
  "TG_TABLE_NAME IN ('memberships', 'api_tokens')",
);
