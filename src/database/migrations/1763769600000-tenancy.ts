import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Tenants, users, memberships (role per tenant), projects, and login throttling. */
export class Tenancy1763769600000 implements MigrationInterface {
  name = 'Tenancy1763769600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE tenants (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT tenants_name_key UNIQUE (name)
      )`);
    await runner.query(`
      CREATE TABLE users (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        email text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 320),
        password_hash text NOT NULL,
        disabled boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT users_email_key UNIQUE (email)
      )`);
    await runner.query(`
      CREATE TABLE memberships (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        role text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, user_id)
      )`);
    await runner.query(`CREATE INDEX memberships_user_id_idx ON memberships (user_id)`);
    await runner.query(`
      CREATE TABLE projects (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
        git_repository_url text,
        next_build_number integer NOT NULL DEFAULT 1 CHECK (next_build_number >= 1),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT projects_tenant_name_key UNIQUE (tenant_id, name),
        CONSTRAINT projects_tenant_id_id_key UNIQUE (tenant_id, id)
      )`);
    await runner.query(`
      CREATE TABLE login_throttle (
        key text PRIMARY KEY,
        failures integer NOT NULL,
        window_started_at timestamptz NOT NULL
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE login_throttle');
    await runner.query('DROP TABLE projects');
    await runner.query('DROP TABLE memberships');
    await runner.query('DROP TABLE users');
    await runner.query('DROP TABLE tenants');
  }
}
