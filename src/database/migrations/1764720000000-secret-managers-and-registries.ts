import type { MigrationInterface, QueryRunner } from 'typeorm';

const REASONS_BEFORE = `'BuildFailed', 'TimedOut', 'OutOfMemory', 'PodEvicted', 'PodDeleted',
  'InvalidSpec', 'InternalError', 'ImagePullFailed', 'PolicyViolation'`;

/**
 * Secret managers and registries per tenant (docs/adr/0021-secret-references.md,
 * docs/adr/0022-registries.md): where each manager is and how kiln authenticates to it, and each
 * registry type's address and credential references, and a project's git credentials (a
 * username and a reference). Never a secret value: settings hold references and file paths only. Builds gain what they pushed (`image_digest`, `images`) and
 * the failure reasons SecretUnavailable and RegistryUnauthorized.
 */
export class SecretManagersAndRegistries1764720000000 implements MigrationInterface {
  name = 'SecretManagersAndRegistries1764720000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE tenant_secret_managers (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('vault', 'aws_secretsmanager', 'azure_keyvault')),
      settings jsonb NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, type))`);
    await runner.query(`CREATE TABLE tenant_registries (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('s3', 'harbor', 'quay', 'artifactory')),
      settings jsonb NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, type))`);
    await runner.query('ALTER TABLE projects ADD COLUMN git_credentials jsonb');
    await runner.query('ALTER TABLE builds ADD COLUMN image_digest text');
    await runner.query(`ALTER TABLE builds ADD COLUMN images jsonb NOT NULL DEFAULT '[]'`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}, 'SecretUnavailable', 'RegistryUnauthorized'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`UPDATE builds SET failure_reason = 'BuildFailed'
      WHERE failure_reason IN ('SecretUnavailable', 'RegistryUnauthorized')`);
    await runner.query('ALTER TABLE builds DROP CONSTRAINT builds_failure_reason_check');
    await runner.query(`ALTER TABLE builds ADD CONSTRAINT builds_failure_reason_check
      CHECK (failure_reason IN (${REASONS_BEFORE}))`);
    await runner.query('ALTER TABLE builds DROP COLUMN images');
    await runner.query('ALTER TABLE builds DROP COLUMN image_digest');
    await runner.query('ALTER TABLE projects DROP COLUMN git_credentials');
    await runner.query('DROP TABLE tenant_registries');
    await runner.query('DROP TABLE tenant_secret_managers');
  }
}
