import type { MigrationInterface, QueryRunner } from 'typeorm';

const REASONS_BEFORE = `'BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted', 'PodDeleted',
  'InvalidSpec', 'InternalError', 'ImagePullFailed', 'PolicyViolation', 'SecretUnavailable',
  'RegistryUnauthorized', 'QueueTimeout', 'PodRefused', 'Unschedulable'`;

/**
 * Provenance and signatures (docs/adr/0054-provenance.md).
 *
 * `tenant_provenance_settings`: whether a build whose provenance cannot be signed or attached
 * fails (`required`, ProvenanceFailed) or succeeds saying so (`optional`, the default), and the
 * secret reference of the tenant's own signing key (null: kiln's generated key).
 *
 * `signing_keys`: every key a tenant's statements were ever signed with, so old statements stay
 * verifiable after a rotation (`retired_at`). A key kiln generated keeps its private half sealed
 * (SecretSealer); one from the tenant's secret manager keeps only its public half and reference.
 * At most one key per tenant is active.
 *
 * `build_provenance`: the signed statements of each successful build, as signed (the Sigstore
 * bundle's exact JSON text, so its payload bytes never change), and where they were attached.
 *
 * `builds.provenance`: `attached`, `stored-only` or `failed: …` (null: the build has none).
 */
export class Provenance1765929600000 implements MigrationInterface {
  name = 'Provenance1765929600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE tenant_provenance_settings (
        tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
        policy text NOT NULL DEFAULT 'optional' CHECK (policy IN ('optional', 'required')),
        signing_key text,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query(`
      CREATE TABLE signing_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        key_id text NOT NULL CHECK (key_id ~ '^[0-9a-f]{64}$'),
        algorithm text NOT NULL DEFAULT 'ecdsa-p256-sha256',
        public_key text NOT NULL,
        private_key_sealed text,
        source text NOT NULL CHECK (source IN ('generated', 'secret-manager')),
        reference text,
        created_at timestamptz NOT NULL DEFAULT now(),
        retired_at timestamptz,
        UNIQUE (tenant_id, key_id),
        CHECK ((source = 'generated') = (private_key_sealed IS NOT NULL))
      )`);
    await runner.query(`
      CREATE UNIQUE INDEX signing_keys_active_idx ON signing_keys (tenant_id)
        WHERE retired_at IS NULL`);
    await runner.query(`
      CREATE TABLE build_provenance (
        build_id uuid PRIMARY KEY REFERENCES builds(id) ON DELETE CASCADE,
        tenant_id uuid NOT NULL,
        key_id text NOT NULL,
        bundle text NOT NULL,
        sbom_bundle text,
        log_digest text NOT NULL,
        log_lines integer NOT NULL,
        attachments jsonb NOT NULL DEFAULT '[]',
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query('ALTER TABLE builds ADD COLUMN provenance text');
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}, 'ProvenanceFailed'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    // An older kiln does not know it: the nearest reason it does know.
    await runner.query(`UPDATE builds SET failure_reason = 'InternalError'
      WHERE failure_reason = 'ProvenanceFailed'`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}))`);
    await runner.query('ALTER TABLE builds DROP COLUMN provenance');
    await runner.query('DROP TABLE build_provenance');
    await runner.query('DROP TABLE signing_keys');
    await runner.query('DROP TABLE tenant_provenance_settings');
  }
}
