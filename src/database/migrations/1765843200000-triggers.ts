import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Builds from git pushes (docs/adr/0053-triggers.md).
 *
 * `triggers`: what a project builds on which git events. The webhook secret is sealed
 * (SecretSealer); `next_poll_at` is when a replica polls the repository next (null: no polling).
 *
 * `trigger_deliveries`: every webhook delivery and every polled ref change, recorded before any
 * build is made. The provider's delivery id is unique per trigger, so a replayed or retried
 * delivery finds its row and builds nothing twice. `event_data` keeps the event as kiln read it, so
 * a delivery left pending by a stopped replica is built by another (`claimed_at`).
 *
 * `trigger_refs`: the last commit polling saw per ref.
 *
 * `builds` gains where a build came from (its trigger, event and pusher: the trigger may be
 * deleted, the build keeps them) and the bookkeeping of the commit status posted for it: the state
 * last posted (`none` when the trigger posts none), the state being attempted and its failed
 * attempts, when to try next, and a claim that keeps other replicas off while a post is under way.
 */
export class Triggers1765843200000 implements MigrationInterface {
  name = 'Triggers1765843200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE triggers (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
        name text NOT NULL,
        provider text NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea', 'forgejo')),
        events text[] NOT NULL,
        branches text[] NOT NULL,
        tags text[] NOT NULL,
        paths text[] NOT NULL,
        build jsonb NOT NULL,
        start boolean NOT NULL,
        concurrency text NOT NULL CHECK (concurrency IN ('parallel', 'serial', 'latest-only')),
        secret_sealed text NOT NULL,
        poll_interval_seconds integer CHECK (poll_interval_seconds BETWEEN 60 AND 86400),
        next_poll_at timestamptz,
        last_polled_at timestamptz,
        poll_error text,
        status_target jsonb,
        enabled boolean NOT NULL DEFAULT true,
        created_by uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (project_id, name)
      )`);
    await runner.query('CREATE INDEX triggers_tenant_idx ON triggers (tenant_id, project_id)');
    await runner.query(`
      CREATE INDEX triggers_poll_due_idx ON triggers (next_poll_at)
        WHERE next_poll_at IS NOT NULL AND enabled`);
    await runner.query(`
      CREATE TABLE trigger_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        trigger_id uuid NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
        delivery_id text NOT NULL,
        event text NOT NULL,
        ref text,
        commit text,
        pusher text,
        outcome text NOT NULL
          CHECK (outcome IN ('pending', 'built', 'filtered', 'duplicate', 'refused', 'failed')),
        detail text,
        build_id uuid REFERENCES builds(id) ON DELETE SET NULL,
        event_data jsonb,
        claimed_at timestamptz,
        received_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (trigger_id, delivery_id)
      )`);
    await runner.query(`
      CREATE INDEX trigger_deliveries_recent_idx
        ON trigger_deliveries (trigger_id, received_at DESC)`);
    await runner.query(`
      CREATE INDEX trigger_deliveries_pending_idx ON trigger_deliveries (received_at)
        WHERE outcome = 'pending'`);
    await runner.query(`
      CREATE TABLE trigger_refs (
        trigger_id uuid NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
        ref text NOT NULL,
        commit text NOT NULL,
        PRIMARY KEY (trigger_id, ref)
      )`);
    await runner.query(`
      ALTER TABLE builds
        ADD COLUMN trigger_id uuid,
        ADD COLUMN trigger_event text,
        ADD COLUMN triggered_by text,
        ADD COLUMN status_posted text,
        ADD COLUMN status_attempted text,
        ADD COLUMN status_attempts integer NOT NULL DEFAULT 0,
        ADD COLUMN status_next_at timestamptz,
        ADD COLUMN status_claimed_until timestamptz,
        ADD COLUMN status_error text`);
    await runner.query(`
      CREATE INDEX builds_trigger_idx ON builds (trigger_id, git_branch, build_number)
        WHERE trigger_id IS NOT NULL AND status IN ('queued', 'in_progress')`);
    // The builds whose commit status may still change: a finished build's last post is final.
    await runner.query(`
      CREATE INDEX builds_status_to_post_idx ON builds (created_at)
        WHERE trigger_id IS NOT NULL
          AND (status_posted IS NULL OR status_posted IN ('pending', 'running'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP INDEX builds_status_to_post_idx');
    await runner.query('DROP INDEX builds_trigger_idx');
    await runner.query(`
      ALTER TABLE builds
        DROP COLUMN status_error, DROP COLUMN status_claimed_until, DROP COLUMN status_next_at,
        DROP COLUMN status_attempts, DROP COLUMN status_attempted,
        DROP COLUMN status_posted, DROP COLUMN triggered_by, DROP COLUMN trigger_event,
        DROP COLUMN trigger_id`);
    await runner.query('DROP TABLE trigger_refs');
    await runner.query('DROP TABLE trigger_deliveries');
    await runner.query('DROP TABLE triggers');
  }
}
