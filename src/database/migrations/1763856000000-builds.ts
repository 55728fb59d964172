import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Builds: the spec's fields, tenant scope, configuration snapshot, lifecycle bookkeeping. */
export class Builds1763856000000 implements MigrationInterface {
  name = 'Builds1763856000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE builds (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        project_id uuid NOT NULL,
        build_number integer NOT NULL CHECK (build_number >= 0),
        status text NOT NULL DEFAULT 'queued'
          CHECK (status IN ('queued', 'in_progress', 'success', 'failed', 'cancelled')),
        git_branch text CHECK (length(git_branch) BETWEEN 1 AND 255),
        git_commit text CHECK (git_commit ~ '^[0-9a-f]{7,40}$'),
        git_author_name text,
        git_author_email text,
        method text,
        config jsonb NOT NULL,
        error_message text,
        failure_reason text CHECK (failure_reason IN ('BuildFailed', 'TimedOut', 'OutOfMemory',
          'PodEvicted', 'PodDeleted', 'InvalidSpec', 'InternalError')),
        cancel_reason text,
        retry_of uuid REFERENCES builds (id) ON DELETE SET NULL,
        progress_current integer CHECK (progress_current >= 0),
        progress_total integer CHECK (progress_total >= 0),
        runner_ref text,
        idempotency_key text,
        request_hash text,
        created_by uuid REFERENCES users (id) ON DELETE SET NULL,
        started_at timestamptz,
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE,
        CONSTRAINT builds_project_number_key UNIQUE (project_id, build_number)
      )`);
    // One queued or running build per project, branch and commit (duplicate create → 409).
    await runner.query(`
      CREATE UNIQUE INDEX builds_active_duplicate_key ON builds (project_id, git_branch, coalesce(git_commit, ''))
        WHERE status IN ('queued', 'in_progress') AND git_branch IS NOT NULL`);
    await runner.query(`
      CREATE UNIQUE INDEX builds_idempotency_key ON builds (tenant_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL`);
    // Listing: every sort key, with and without the status and project filters, tie-broken by id.
    await runner.query(
      `CREATE INDEX builds_tenant_created_idx ON builds (tenant_id, created_at, id)`,
    );
    await runner.query(
      `CREATE INDEX builds_tenant_updated_idx ON builds (tenant_id, updated_at, id)`,
    );
    await runner.query(
      `CREATE INDEX builds_tenant_number_idx ON builds (tenant_id, build_number, id)`,
    );
    await runner.query(
      `CREATE INDEX builds_tenant_status_created_idx ON builds (tenant_id, status, created_at, id)`,
    );
    await runner.query(
      `CREATE INDEX builds_tenant_project_created_idx ON builds (tenant_id, project_id, created_at, id)`,
    );
    await runner.query(
      `CREATE INDEX builds_retry_of_idx ON builds (retry_of) WHERE retry_of IS NOT NULL`,
    );
    await runner.query(`
      CREATE INDEX builds_project_success_idx ON builds (project_id, completed_at DESC)
        WHERE status = 'success'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE builds');
  }
}
