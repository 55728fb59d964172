import type { MigrationInterface, QueryRunner } from 'typeorm';

const REASONS_BEFORE = `'BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted', 'PodDeleted',
  'InvalidSpec', 'InternalError', 'ImagePullFailed', 'PolicyViolation', 'SecretUnavailable',
  'RegistryUnauthorized'`;

/**
 * What admission ends builds with (docs/adr/0042-admission-in-postgres.md): the failure reasons
 * QueueTimeout (the build waited past KILN_QUEUE_TTL_SECONDS), PodRefused (the cluster refuses
 * its pod for good) and Unschedulable (no node for its pod within
 * KILN_OPERATOR_UNSCHEDULABLE_SECONDS); the index that finds waits past their time to live, the
 * one that finds open rows whose build ended (the sweep), the one a pass reads each
 * project's first waiting builds by, and the one the estimate reads the latest runs by.
 */
export class AdmissionTimeouts1765324800000 implements MigrationInterface {
  name = 'AdmissionTimeouts1765324800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE INDEX build_admissions_queued_idx ON build_admissions (queued_at)
        WHERE admitted_at IS NULL AND released_at IS NULL`);
    await runner.query(`
      CREATE INDEX build_admissions_open_idx ON build_admissions (build_id)
        WHERE released_at IS NULL`);
    // A pass with n free slots reads the first n waiting builds of each project, in order.
    await runner.query(`
      CREATE INDEX build_admissions_waiting_project_idx
        ON build_admissions (tenant_id, project_id, seq)
        WHERE admitted_at IS NULL AND released_at IS NULL`);
    // The median of the latest runs (a waiting build's estimated start): the newest releases.
    await runner.query(`
      CREATE INDEX build_admissions_released_idx ON build_admissions (released_at)
        WHERE admitted_at IS NOT NULL AND released_at IS NOT NULL`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}, 'QueueTimeout', 'PodRefused', 'Unschedulable'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    // An older kiln knows none of them: the nearest reason it does know.
    await runner.query(`UPDATE builds SET failure_reason = 'InternalError'
      WHERE failure_reason IN ('QueueTimeout', 'PodRefused', 'Unschedulable')`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}))`);
    await runner.query('DROP INDEX build_admissions_released_idx');
    await runner.query('DROP INDEX build_admissions_waiting_project_idx');
    await runner.query('DROP INDEX build_admissions_open_idx');
    await runner.query('DROP INDEX build_admissions_queued_idx');
  }
}
