import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit log (docs/adr/0049-audit-log.md, docs/operations.md "Audit log"): one row per
 * state-changing API call and per kiln-admin action, never a request body, header or secret.
 *
 * No foreign keys: an event outlives the user, tenant or build it names (deleting a tenant must
 * not erase who did what to it), and a refused call may name a tenant or target that does not
 * exist. Rows leave only by the audit retention (KILN_AUDIT_RETENTION_DAYS), in batches.
 *
 * Indexes serve GET /api/v1/audit: every list is newest first, within a tenant or across them,
 * filtered by actor, action or target; retention walks `occurred_at` from the oldest.
 */
export class AuditEvents1765699200000 implements MigrationInterface {
  name = 'AuditEvents1765699200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE audit_events (
        id uuid PRIMARY KEY,
        occurred_at timestamptz NOT NULL,
        actor_type text NOT NULL
          CHECK (actor_type IN ('user', 'api_token', 'anonymous', 'upload_token', 'kiln-admin')),
        actor_user_id uuid,
        actor_email text CHECK (char_length(actor_email) <= 320),
        actor_token_id uuid,
        tenant_id uuid,
        action text NOT NULL CHECK (char_length(action) BETWEEN 1 AND 64),
        target_type text CHECK (char_length(target_type) <= 64),
        target_id text CHECK (char_length(target_id) <= 200),
        result text NOT NULL CHECK (result IN ('success', 'refused', 'failed')),
        status smallint,
        request_id text CHECK (char_length(request_id) <= 128),
        source_address text CHECK (char_length(source_address) <= 64),
        user_agent text CHECK (char_length(user_agent) <= 256)
      )`);
    await runner.query(
      'CREATE INDEX audit_events_by_time ON audit_events (occurred_at DESC, id DESC)',
    );
    await runner.query(
      'CREATE INDEX audit_events_by_tenant ON audit_events (tenant_id, occurred_at DESC, id DESC)',
    );
    await runner.query(
      'CREATE INDEX audit_events_by_actor ON audit_events (actor_user_id, occurred_at DESC)',
    );
    await runner.query(
      'CREATE INDEX audit_events_by_action ON audit_events (action, occurred_at DESC)',
    );
    await runner.query(
      'CREATE INDEX audit_events_by_target ON audit_events (target_id, occurred_at DESC)',
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE audit_events');
  }
}
