import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A duplicate is the same configuration, not the same branch (docs/adr/0030-duplicate-builds.md).
 * Until now a project had at most one queued or running build per branch and commit, so a
 * monorepo could not build two images of one commit at once. Now the key is `spec_digest`, the
 * digest of what decides the output (method and its config, source, output, environment, build
 * args), which the API and the operator compute at create (BuildSpec's specDigest).
 *
 * Builds already queued or running keep a null digest: computing it needs KILN_SECRETS_KEY (secret
 * values enter as keyed fingerprints), which a migration does not have. They are not refused as
 * anyone's duplicate, nor can they refuse a new build; every build created from now on is keyed.
 */
export class SpecDigest1765065600000 implements MigrationInterface {
  name = 'SpecDigest1765065600000';
  /** CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction; builds are written meanwhile. */
  transaction = false;

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE builds ADD COLUMN IF NOT EXISTS spec_digest text');
    await dropInvalid(runner, 'builds_active_spec_key');
    await runner.query(`
      CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS builds_active_spec_key
        ON builds (project_id, spec_digest)
        WHERE status IN ('queued', 'in_progress') AND spec_digest IS NOT NULL`);
    await runner.query('DROP INDEX CONCURRENTLY IF EXISTS builds_active_duplicate_key');
  }

  async down(runner: QueryRunner): Promise<void> {
    await dropInvalid(runner, 'builds_active_duplicate_key');
    await runner.query(`
      CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS builds_active_duplicate_key
        ON builds (project_id, git_branch, coalesce(git_commit, ''))
        WHERE status IN ('queued', 'in_progress') AND git_branch IS NOT NULL`);
    await runner.query('DROP INDEX CONCURRENTLY IF EXISTS builds_active_spec_key');
    await runner.query('ALTER TABLE builds DROP COLUMN IF EXISTS spec_digest');
  }
}

/** An index build that was interrupted (kiln stopped midway) leaves an invalid index: drop it. */
async function dropInvalid(runner: QueryRunner, name: string): Promise<void> {
  const invalid = (await runner.query(
    'SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid',
    [name],
  )) as unknown[];
  if (invalid.length > 0) await runner.query(`DROP INDEX CONCURRENTLY ${name}`);
}
