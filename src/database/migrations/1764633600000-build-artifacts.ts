import type { MigrationInterface, QueryRunner } from 'typeorm';

const REASONS_BEFORE = `'BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted', 'PodDeleted',
  'InvalidSpec', 'InternalError', 'ImagePullFailed'`;

/**
 * What the SBOM and scan steps found (docs/adr/0019-build-steps-and-artifacts.md): one row per
 * build and kind, the document gzip-compressed and capped; the per-build upload tokens, kept as
 * SHA-256 hashes only; and the PolicyViolation failure reason of the scan policy gate.
 */
export class BuildArtifacts1764633600000 implements MigrationInterface {
  name = 'BuildArtifacts1764633600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE build_artifacts (
      build_id uuid NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('sbom', 'scan')),
      tool text NOT NULL,
      format text NOT NULL,
      content bytea NOT NULL,
      received_bytes integer NOT NULL CHECK (received_bytes >= 0),
      truncated boolean NOT NULL,
      summary jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (build_id, kind))`);
    await runner.query(`CREATE TABLE build_upload_tokens (
      token_hash bytea PRIMARY KEY,
      build_id uuid NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('sbom', 'scan')),
      expires_at timestamptz NOT NULL)`);
    await runner.query('CREATE INDEX build_upload_tokens_build ON build_upload_tokens (build_id)');
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}, 'PolicyViolation'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`UPDATE builds SET failure_reason = 'BuildFailed'
      WHERE failure_reason = 'PolicyViolation'`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}))`);
    await runner.query('DROP TABLE build_upload_tokens');
    await runner.query('DROP TABLE build_artifacts');
  }
}
