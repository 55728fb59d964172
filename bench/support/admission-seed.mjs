// Rows for bench/admission.bench.mjs, written straight into PostgreSQL: tenants the bench's admin
// is a member of (api-seed.mjs's addTenant), projects, and one INSERT … SELECT generate_series of
// builds with their build_admissions rows, as issue 30's admission leaves them: finished builds
// whose admissions were released (each tenant's history: the fair share's tie-break and the
// median run of the estimate), builds admitted and running, and builds started and waiting.
import { addProjects, addTenant, continueBuildNumbers } from './api-seed.mjs';

/**
 * Builds numbered g = 0 … history + running + waiting - 1, in that order of kinds: history
 * (success, started and ended over the last day), running (in_progress, admitted minutes ago) and
 * waiting (in_progress, started one after another up to now, not admitted). Build g of a kind
 * goes to tenant (i mod T), project ((i div T) mod P), i being its number within the kind; but
 * the first `burst` waiting builds are all tenant 0's (one tenant started a burst before the
 * others' builds), and the rest go round-robin over tenants 1 … T-1.
 * build_number is g + 1 (unique in each project), so the admissions are read back in g's order.
 *
 * runner_ref is not the local runner's 'local:' prefix nor null: kiln's local runner fails, when it
 * starts, every in_progress build whose runner_ref is null or starts with 'local:'
 * (BuildsRepository.runningWithRunner).
 */
const SEED_BUILDS = `
  INSERT INTO builds (tenant_id, project_id, build_number, status, git_branch, git_commit,
    git_author_name, git_author_email, method, config, spec, runner_ref, created_by,
    image_digest, images, started_at, completed_at, created_at, updated_at)
  SELECT ($1::uuid[])[1 + t], ($2::uuid[])[1 + t * $3::int + p], g + 1, status, 'main', git_commit,
    'Ada Lovelace', 'ada@example.com', NULL,
    '{"form": "reference", "build_args": null}',
    jsonb_build_object('version', 1, 'form', 'reference', 'method', 'kaniko', 'config', '{}'::jsonb,
      'source', jsonb_build_object('repository',
        'https://git.example.com/admission/app-' || t || '-' || p || '.git',
        'branch', 'main', 'commit', git_commit, 'context', '.'),
      'output', jsonb_build_object('repository',
        'registry.example.com/admission/app-' || t || '-' || p, 'tags', '[]'::jsonb,
        'registryType', NULL),
      'sbomTool', NULL, 'scanTool', NULL, 'scanPolicy', NULL, 'secretManager', NULL,
      'env', '{}'::jsonb, 'buildArgs', '{}'::jsonb, 'timeoutSeconds', 3600),
    CASE status WHEN 'in_progress' THEN 'kiln-builds/admission-bench-' || g END,
    $4::uuid,
    CASE status WHEN 'success' THEN 'sha256:' || encode(sha256(('image' || g)::bytea), 'hex') END,
    '[]'::jsonb, started, completed, started - interval '2 seconds', coalesce(completed, started)
  FROM (
    SELECT g, i, kind, git_commit,
      -- A waiting build of the burst is tenant 0's; the others go round-robin over the rest.
      CASE WHEN kind = 'waiting' AND i < $9::int THEN 0
           WHEN kind = 'waiting' THEN 1 + (i - $9::int) % ($5::int - 1)
           ELSE i % $5::int END AS t,
      CASE WHEN kind = 'waiting' AND i < $9::int THEN i % $3::int
           WHEN kind = 'waiting' THEN ((i - $9::int) / ($5::int - 1)) % $3::int
           ELSE (i / $5::int) % $3::int END AS p,
      CASE kind WHEN 'history' THEN 'success' ELSE 'in_progress' END AS status,
      CASE kind
        -- Over the day before the running builds began, one after another.
        WHEN 'history' THEN now() - interval '90 minutes'
          - make_interval(secs => ($6::int - i) * 86400.0 / greatest($6::int, 1))
        -- Between 30 and 5 minutes ago.
        WHEN 'running' THEN now() - make_interval(secs => 300 + (i * 997) % 1500)
        -- One after another over the last 80 minutes, the last a minute ago.
        ELSE now() - interval '1 minute'
          - make_interval(secs => ($8::int - i) * 4800.0 / greatest($8::int, 1))
      END AS started,
      CASE kind WHEN 'history'
        THEN now() - interval '90 minutes'
          - make_interval(secs => ($6::int - i) * 86400.0 / greatest($6::int, 1))
          + make_interval(secs => 60 + (i * 37) % 600)
      END AS completed
    FROM (
      SELECT g,
        CASE WHEN g < $6::int THEN 'history'
             WHEN g < $6::int + $7::int THEN 'running'
             ELSE 'waiting' END AS kind,
        CASE WHEN g < $6::int THEN g
             WHEN g < $6::int + $7::int THEN g - $6::int
             ELSE g - $6::int - $7::int END AS i,
        substr(md5('commit' || g) || md5('tree' || g), 1, 40) AS git_commit
      FROM generate_series(0, $6::int + $7::int + $8::int - 1) AS g
    ) AS kinds
  ) AS timed
  ORDER BY g`;

/**
 * Their admissions, in g's order (so seq follows it): history admitted at its start and released
 * at its end, running admitted a second after its start, waiting queued at its start.
 */
const SEED_ADMISSIONS = `
  INSERT INTO build_admissions (build_id, tenant_id, project_id, queued_at, admitted_at,
    released_at)
  SELECT id, tenant_id, project_id, started_at,
    CASE WHEN build_number <= $2::int + $3::int THEN started_at + interval '1 second' END,
    completed_at
  FROM builds WHERE tenant_id = ANY($1::uuid[]) ORDER BY build_number`;

/**
 * `tenants` tenants named adm-000 … with the admin (userId) as a member, `projects` projects each,
 * and `history` finished, `running` running and `waiting` waiting builds spread across them, the
 * first `burst` waiting ones all the first tenant's (see SEED_BUILDS). Settings: the first tenth of the tenants weigh 2 in the fair
 * share; the `limited` tenants just below `running` (each runs one build) have their own limit
 * of 1, so their waiting builds are held (TenantLimit) until their running build ends.
 * Answers the tenants' ids (in order) and the projects' (tenant-major).
 */
export async function seedAdmission(
  db,
  { userId, tenants, projects, history, running, waiting, burst, limited },
) {
  const tenantIds = [];
  const projectIds = [];
  for (let t = 0; t < tenants; t++) {
    const id = await addTenant(db, `adm-${String(t).padStart(3, '0')}`, userId);
    tenantIds.push(id);
    projectIds.push(...(await addProjects(db, id, 'app', projects)));
  }
  await db.query(SEED_BUILDS, [
    tenantIds,
    projectIds,
    projects,
    userId,
    tenants,
    history,
    running,
    waiting,
    burst,
  ]);
  await continueBuildNumbers(db, { tenantIds });
  await db.query(SEED_ADMISSIONS, [tenantIds, history, running]);
  const weighted = tenantIds.slice(0, Math.floor(tenants / 10));
  const capped = tenantIds.slice(Math.max(0, Math.min(running, tenants) - limited), running);
  await db.query(
    `INSERT INTO tenant_admission_settings (tenant_id, weight, max_running)
     SELECT id, CASE WHEN id = ANY($1::uuid[]) THEN 2 ELSE 1 END,
            CASE WHEN id = ANY($2::uuid[]) THEN 1 END
       FROM unnest($3::uuid[]) AS id
      WHERE id = ANY($1::uuid[]) OR id = ANY($2::uuid[])`,
    [weighted, capped, tenantIds],
  );
  return { tenantIds, projectIds, weighted: weighted.length, capped: capped.length };
}
