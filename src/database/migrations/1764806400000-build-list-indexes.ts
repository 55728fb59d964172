import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * GET /builds at a million builds in one tenant (docs/adr/0023-list-counts-and-build-numbers.md):
 * for each filter set and sort key of the list, an index that reads its pages in order with every
 * condition an index condition, so a page reads only the rows up to its end.
 *
 * Build numbers stay unique per project, now with tenant_id leading the key. Through unique
 * (project_id, build_number) the planner read every build of another tenant's project, each
 * failing the tenant condition, to answer an empty page. The two keys are equivalent (a project
 * belongs to one tenant), and the new one is also the list's index for one project by number.
 *
 * The statistics tell the planner that a project belongs to one tenant, so its estimates past
 * the exact count limit are not scaled down by the tenant's share of all builds.
 */
export class BuildListIndexes1764806400000 implements MigrationInterface {
  name = 'BuildListIndexes1764806400000';
  /** CREATE INDEX CONCURRENTLY cannot run in a transaction; it lets builds be written meanwhile. */
  transaction = false;

  async up(runner: QueryRunner): Promise<void> {
    for (const [name, columns] of INDEXES) await createConcurrently(runner, name, columns);
    await createConcurrently(
      runner,
      'builds_tenant_project_number_key',
      'tenant_id, project_id, build_number',
      'UNIQUE',
    );
    if (!(await constraintExists(runner, 'builds_tenant_project_number_key'))) {
      await runner.query(`ALTER TABLE builds DROP CONSTRAINT builds_project_number_key,
        ADD CONSTRAINT builds_tenant_project_number_key
          UNIQUE USING INDEX builds_tenant_project_number_key`);
    }
    await runner.query(`CREATE STATISTICS IF NOT EXISTS builds_scope_stats (dependencies)
      ON tenant_id, project_id, status FROM builds`);
    await runner.query('ANALYZE builds');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP STATISTICS IF EXISTS builds_scope_stats');
    await createConcurrently(
      runner,
      'builds_project_number_key',
      'project_id, build_number',
      'UNIQUE',
    );
    if (!(await constraintExists(runner, 'builds_project_number_key'))) {
      await runner.query(`ALTER TABLE builds DROP CONSTRAINT builds_tenant_project_number_key,
        ADD CONSTRAINT builds_project_number_key UNIQUE USING INDEX builds_project_number_key`);
    }
    for (const [name] of INDEXES) await runner.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  }
}

/** Name and columns; each key ends in id, the list's tie-break. */
const INDEXES: ReadonlyArray<readonly [string, string]> = [
  ['builds_tenant_status_updated_idx', 'tenant_id, status, updated_at, id'],
  ['builds_tenant_status_number_idx', 'tenant_id, status, build_number, id'],
  ['builds_tenant_project_updated_idx', 'tenant_id, project_id, updated_at, id'],
  ['builds_tenant_project_status_created_idx', 'tenant_id, project_id, status, created_at, id'],
  ['builds_tenant_project_status_updated_idx', 'tenant_id, project_id, status, updated_at, id'],
  ['builds_tenant_project_status_number_idx', 'tenant_id, project_id, status, build_number, id'],
];

/**
 * Builds an index on builds without blocking writes, once. A build that was interrupted (kiln
 * stopped midway) leaves an invalid index behind: it is dropped and built again.
 */
async function createConcurrently(
  runner: QueryRunner,
  name: string,
  columns: string,
  kind: 'UNIQUE' | '' = '',
): Promise<void> {
  const invalid = (await runner.query(
    'SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid',
    [name],
  )) as unknown[];
  if (invalid.length > 0) await runner.query(`DROP INDEX CONCURRENTLY ${name}`);
  await runner.query(
    `CREATE ${kind} INDEX CONCURRENTLY IF NOT EXISTS ${name} ON builds (${columns})`,
  );
}

async function constraintExists(runner: QueryRunner, name: string): Promise<boolean> {
  const rows = (await runner.query(
    `SELECT 1 FROM pg_constraint WHERE conrelid = 'builds'::regclass AND conname = $1`,
    [name],
  )) as unknown[];
  return rows.length > 0;
}
