// Rows for bench/api.bench.mjs, written straight into PostgreSQL: tenants the bench's admin is a
// member of, projects, and builds made by one INSERT … SELECT generate_series each, with values a
// year of real use would leave: several projects, mostly finished builds (success, some failed
// or cancelled) and a few queued or running at the newest end, created_at spread over the year.

/** A tenant with the user as its admin. */
export async function addTenant(db, name, userId) {
  const { rows } = await db.query('INSERT INTO tenants (name) VALUES ($1) RETURNING id', [name]);
  await db.query(`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'admin')`, [
    rows[0].id,
    userId,
  ]);
  return rows[0].id;
}

/** `count` projects `<prefix>-<i>` with a repository each; their ids in order. */
export async function addProjects(db, tenantId, prefix, count) {
  const { rows } = await db.query(
    `INSERT INTO projects (tenant_id, name, git_repository_url)
     SELECT $1, $2::text || '-' || i, 'https://git.example.com/' || $2::text || '/app-' || i || '.git'
       FROM generate_series(0, $3::int - 1) AS i
     ORDER BY i
     RETURNING id`,
    [tenantId, prefix, count],
  );
  return rows.map((row) => row.id);
}

/** Builds a value per row from g, the row's number; created_at grows with g over `SPAN`. */
const SEED_BUILDS = `
  INSERT INTO builds (tenant_id, project_id, build_number, status, git_branch, git_commit,
    git_author_name, git_author_email, method, config, spec, error_message, failure_reason,
    cancel_reason, progress_current, progress_total, runner_ref, created_by, image_digest, images,
    started_at, completed_at, created_at, updated_at)
  SELECT $1, ($2::uuid[])[1 + p], g / n + 1, status, branch, git_commit, author, email, NULL,
    '{"form": "reference", "build_args": null}',
    jsonb_build_object('version', 1, 'form', 'reference', 'method', 'kaniko', 'config', '{}'::jsonb,
      'source', jsonb_build_object('repository', repository, 'branch', branch,
        'commit', git_commit, 'context', '.'),
      'output', jsonb_build_object('repository', image, 'tags', '[]'::jsonb, 'registryType', NULL),
      'sbomTool', NULL, 'scanTool', NULL, 'scanPolicy', NULL, 'secretManager', NULL,
      'env', '{}'::jsonb, 'buildArgs', '{}'::jsonb, 'timeoutSeconds', 3600),
    CASE status WHEN 'failed' THEN 'error: building at STEP "RUN npm ci": exit status 1' END,
    CASE status WHEN 'failed' THEN 'BuildFailed' END,
    CASE status WHEN 'cancelled' THEN 'superseded by a newer commit' END,
    CASE status WHEN 'in_progress' THEN 3 END,
    CASE status WHEN 'in_progress' THEN 7 END,
    -- Not the local runner's 'local:' prefix: kiln's local runner fails the running builds it
    -- finds with its own prefix (or none) when it starts.
    CASE status WHEN 'in_progress' THEN 'kiln-builds/bench-' || g END,
    $4,
    CASE status WHEN 'success' THEN 'sha256:' || digest END,
    CASE status WHEN 'success'
      THEN jsonb_build_array(image || ':' || left(git_commit, 12) || '@sha256:' || digest)
      ELSE '[]'::jsonb END,
    started, completed, created, coalesce(completed, started, created)
  FROM (
    SELECT *,
      CASE WHEN status = 'queued' THEN NULL ELSE created + make_interval(secs => 2 + g % 30) END
        AS started,
      CASE WHEN status IN ('success', 'failed', 'cancelled')
        THEN created + make_interval(secs => 40 + (g * 37) % 900) END AS completed
    FROM (
      SELECT g, n, g % n AS p,
        CASE WHEN g >= $3::int - 5 THEN 'queued'
             WHEN g >= $3::int - 15 THEN 'in_progress'
             WHEN g % 53 = 7 THEN 'cancelled'
             WHEN g % 7 = 3 THEN 'failed'
             ELSE 'success' END AS status,
        (ARRAY['main', 'main', 'main', 'develop', 'release/2.4', 'feature/login-form',
               'fix/cache-key', 'renovate/node-22.x'])[1 + (g / n) % 8] AS branch,
        substr(md5('commit' || g) || md5('tree' || g), 1, 40) AS git_commit,
        (ARRAY['Ada Lovelace', 'Grace Hopper', 'Linus Torvalds', 'Margaret Hamilton',
               'Ken Thompson', 'dependabot[bot]'])[1 + g % 6] AS author,
        (ARRAY['ada@example.com', 'grace@example.com', 'linus@example.com',
               'margaret@example.com', 'ken@example.com', 'bot@example.com'])[1 + g % 6] AS email,
        $5::text || '/app-' || (g % n) || '.git' AS repository,
        'registry.example.com/bench/app-' || (g % n) AS image,
        encode(sha256(('image' || g)::bytea), 'hex') AS digest,
        now() - make_interval(secs => ($3::int - g) * 31536000.0 / $3::int + (g::bigint * 7919) % 300)
          AS created
      FROM generate_series(0, $3::int - 1) AS g,
           (SELECT cardinality($2::uuid[]) AS n) AS projects
    ) AS numbered
  ) AS timed`;

/**
 * `count` builds in the tenant, spread round-robin over `projectIds` (each with build numbers
 * 1, 2, …, and the project's next number after them), created by `userId`. `repositoryPrefix`
 * is the projects' repository URL without `/app-<i>.git` (addProjects' layout).
 */
export async function seedBuilds(db, { tenantId, projectIds, userId, count, repositoryPrefix }) {
  await db.query(SEED_BUILDS, [tenantId, projectIds, count, userId, repositoryPrefix]);
  await continueBuildNumbers(db, { projectIds });
}

/**
 * Sets each project's next build number past the builds seeded in it, for the projects given or
 * every project of the tenants given: a build created afterwards numbers on from there.
 */
export async function continueBuildNumbers(db, { projectIds, tenantIds }) {
  const [column, ids] =
    projectIds === undefined ? ['tenant_id', tenantIds] : ['project_id', projectIds];
  await db.query(
    `UPDATE projects p SET next_build_number = b.next
       FROM (SELECT project_id, max(build_number) + 1 AS next FROM builds
              WHERE ${column} = ANY($1::uuid[]) GROUP BY project_id) b
      WHERE p.id = b.project_id`,
    [ids],
  );
}
