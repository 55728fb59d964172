import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * builds.spec: what a runner needs, captured at create (the BuildSpec of src/build-methods/).
 * Existing builds get theirs from their configuration snapshot and their project as it is now;
 * kiln's own default registry is not known here, so a build that relied on it keeps its image
 * local when retried (bare tags are not pushed). Frozen SQL: this must not follow later code.
 */
export class BuildSpec1764288000000 implements MigrationInterface {
  name = 'BuildSpec1764288000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE builds ADD COLUMN spec jsonb`);
    await runner.query(`
      UPDATE builds b SET spec = s.spec
        FROM (
          SELECT x.id, jsonb_build_object(
              'version', 1,
              'form', x.config->>'form',
              'method', COALESCE(x.method, 'kaniko'),
              'config', CASE WHEN x.config->>'form' = 'wizard' THEN
                  (x.bc - ARRAY['build_type', 'sbom_tool', 'scan_tool', 'registry_type',
                                'secret_manager_type', 'build_context', 'build_args',
                                'registry_repository'])
                  || CASE WHEN COALESCE(x.m->>'base_image', '') = '' THEN '{}'::jsonb
                          ELSE jsonb_build_object('base_image', x.m->'base_image') END
                  || CASE WHEN jsonb_array_length(COALESCE(x.m->'instructions', '[]')) = 0
                          THEN '{}'::jsonb
                          ELSE jsonb_build_object('instructions', x.m->'instructions') END
                ELSE '{}'::jsonb END,
              'source', jsonb_build_object(
                'repository', p.git_repository_url,
                'branch', x.git_branch,
                'commit', x.git_commit,
                'context', COALESCE(NULLIF(x.bc->>'build_context', ''), '.')),
              'output', jsonb_build_object(
                'repository', COALESCE(
                  NULLIF(x.bc->>'registry_repository', ''),
                  (SELECT substring(t.tag FROM '^(.+/[^/]*):[^:/]*$')
                     FROM jsonb_array_elements_text(COALESCE(x.m->'tags', '[]')) WITH ORDINALITY
                          AS t(tag, n)
                    WHERE t.tag ~ '^.+/[^/]*:[^:/]*$'
                    ORDER BY t.n LIMIT 1),
                  CASE WHEN p.default_registry IS NULL THEN NULL
                       ELSE p.default_registry || '/' || COALESCE(NULLIF(
                         regexp_replace(
                           regexp_replace(lower(p.name), '[^a-z0-9._-]+', '-', 'g'),
                           '^[^a-z0-9]+|[^a-z0-9]+$', '', 'g'), ''), 'project') END),
                'tags', COALESCE(x.m->'tags', '[]'),
                'registryType', x.bc->'registry_type'),
              'sbomTool', x.bc->'sbom_tool',
              'scanTool', x.bc->'scan_tool',
              'secretManager', x.bc->'secret_manager_type',
              'env', COALESCE(x.m->'environment', '{}'),
              'buildArgs', COALESCE(
                NULLIF(CASE WHEN x.config->>'form' = 'wizard' THEN x.bc->'build_args'
                            ELSE x.config->'build_args' END, 'null'::jsonb),
                '{}'),
              'timeoutSeconds', 3600) AS spec
            FROM (SELECT id, project_id, method, config, git_branch, git_commit,
                         config->'manifest' AS m,
                         config#>'{manifest,build_config}' AS bc
                    FROM builds) x
            LEFT JOIN projects p ON p.id = x.project_id
        ) s
       WHERE s.id = b.id`);
    await runner.query(`ALTER TABLE builds ALTER COLUMN spec SET NOT NULL`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE builds DROP COLUMN spec`);
  }
}
