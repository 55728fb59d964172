import type { MigrationInterface, QueryRunner } from 'typeorm';
import { withoutCredentials, withoutCredentialsDeep } from '../../common/url-credentials.js';
import { noteFromMigration } from './notes.js';

/**
 * No URL kiln stores may carry credentials (docs/adr/0031-credentials-in-urls-and-masking.md).
 * Until now a `user:password@` was accepted in a project's repository URL and in URLs of a tenant's
 * secret manager and registry settings; from there it reached `GET /projects`, `kiln … list`, the
 * spec of every build of the project and failed builds' error messages. This strips the credentials
 * from every such stored value and says which rows it changed (never what it removed). Whoever
 * relied on them gives them the supported way: a project's git credentials, or the settings' own
 * secret references.
 *
 * Not rewritten: log lines already stored (build_log_lines may hold a hundred million rows; from
 * now on LogSink stores every line without URL credentials).
 */
export class UrlCredentials1765152000000 implements MigrationInterface {
  name = 'UrlCredentials1765152000000';

  async up(runner: QueryRunner): Promise<void> {
    const projects = (await runner.query(
      `SELECT id, tenant_id, git_repository_url AS url FROM projects
        WHERE git_repository_url LIKE '%://%@%'`,
    )) as Array<{ id: string; tenant_id: string; url: string }>;
    for (const project of projects) {
      const cleaned = withoutCredentials(project.url);
      if (cleaned === project.url) continue;
      await runner.query('UPDATE projects SET git_repository_url = $2 WHERE id = $1', [
        project.id,
        cleaned,
      ]);
      noteFromMigration(
        { table: 'projects', project_id: project.id, tenant_id: project.tenant_id },
        'removed credentials from the git_repository_url of this project: give them with `kiln project git-credentials`',
      );
    }

    for (const table of ['tenant_secret_managers', 'tenant_registries'] as const) {
      const rows = (await runner.query(
        `SELECT tenant_id, type, settings FROM ${table} WHERE settings::text LIKE '%://%@%'`,
      )) as Array<{ tenant_id: string; type: string; settings: Record<string, unknown> }>;
      for (const row of rows) {
        const cleaned = withoutCredentialsDeep(row.settings);
        const fields = Object.keys(row.settings).filter(
          (key) => JSON.stringify(row.settings[key]) !== JSON.stringify(cleaned[key]),
        );
        if (fields.length === 0) continue;
        await runner.query(`UPDATE ${table} SET settings = $3 WHERE tenant_id = $1 AND type = $2`, [
          row.tenant_id,
          row.type,
          JSON.stringify(cleaned),
        ]);
        noteFromMigration(
          { table, tenant_id: row.tenant_id, type: row.type, fields },
          `removed credentials from URLs in the ${row.type} settings of this tenant: give them as the settings' secret references`,
        );
      }
    }

    const specs = (await runner.query(
      `SELECT id, spec -> 'source' ->> 'repository' AS url FROM builds
        WHERE spec -> 'source' ->> 'repository' LIKE '%://%@%'`,
    )) as Array<{ id: string; url: string }>;
    const messages = (await runner.query(
      `SELECT id, error_message AS message FROM builds WHERE error_message LIKE '%://%@%'`,
    )) as Array<{ id: string; message: string }>;
    const builds = new Set<string>();
    for (const { id, url } of specs) {
      const cleaned = withoutCredentials(url);
      if (cleaned === url) continue;
      await runner.query(
        `UPDATE builds SET spec = jsonb_set(spec, '{source,repository}', to_jsonb($2::text))
          WHERE id = $1`,
        [id, cleaned],
      );
      builds.add(id);
    }
    for (const { id, message } of messages) {
      const cleaned = withoutCredentials(message);
      if (cleaned === message) continue;
      await runner.query('UPDATE builds SET error_message = $2 WHERE id = $1', [id, cleaned]);
      builds.add(id);
    }
    if (builds.size > 0) {
      const ids = [...builds];
      noteFromMigration(
        { table: 'builds', count: ids.length, build_ids: ids.slice(0, 100) },
        'removed credentials from the source repository or error message of these builds',
      );
    }
  }

  /** The credentials are gone for good: there is nothing to put back. */
  async down(): Promise<void> {}
}
