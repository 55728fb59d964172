/** The SQL of admission (AdmissionStore): the queue's order in closed form and its statements. */
import type { AdmissionLimits } from './fair-share.js';

/**
 * Every admission pass of every kiln process takes this lock for its transaction: two passes
 * never count the same free slot.
 */
export const ADMISSION_LOCK = `SELECT pg_advisory_xact_lock(hashtext('kiln_admission'))`;

/**
 * The tenants (`by` tenant) or (tenant, project) pairs (`by` project) with a waiting build, one
 * index probe each: a skip scan of build_admissions_waiting_idx (tenant_id, seq) or
 * build_admissions_waiting_project_idx, instead of reading every waiting build to find them.
 * None when `first` (an expression) is not positive: no probe at all.
 */
function waitingGroups(by: 'tenant' | 'project', first: string): string {
  const columns = by === 'tenant' ? ['tenant_id'] : ['tenant_id', 'project_id'];
  const list = (prefix: string) => columns.map((c) => `${prefix}${c}`).join(', ');
  return `
  WITH RECURSIVE groups AS (
    (SELECT ${list('')} FROM build_admissions
      WHERE admitted_at IS NULL AND released_at IS NULL AND ${first} > 0
      ORDER BY ${list('')} LIMIT 1)
    UNION ALL
    SELECT ${list('next.')} FROM groups
     CROSS JOIN LATERAL (
       SELECT ${list('a.')} FROM build_admissions a
        WHERE a.admitted_at IS NULL AND a.released_at IS NULL
          AND (${list('a.')}) > (${list('groups.')})
        ORDER BY ${list('a.')} LIMIT 1) next
  )
  SELECT ${list('')} FROM groups`;
}

/**
 * Which waiting builds a QUEUE statement reads: all of them (null), or for a pass only the first n
 * of each project (`by` project: projects have a limit) or of each tenant (no project limit),
 * where n is the installation's free slots, the only ones the pass could take. A build past them
 * has n builds of its own project, or tenant, before it: their keys are lower, they fit wherever
 * it would, and so they fill the n slots first; and the keys and slots of those n do not depend
 * on what follows. Needs the installation's limit.
 */
export interface QueueScope {
  readonly by: 'tenant' | 'project';
}

/** The three limits as a statement reads them: its parameters, or literals (`literalsOf`). */
export interface LimitsSql {
  /** The tenants' default limit ($1), the projects' ($2), the installation's ($3); int or NULL. */
  readonly tenant: string;
  readonly project: string;
  readonly installation: string;
}

/** $1, $2, $3: the parameters `parametersOf` answers. */
const PARAMETERS: LimitsSql = { tenant: '$1::int', project: '$2::int', installation: '$3::int' };

/**
 * The limits as SQL literals, for statements sent without parameters: several in one round trip
 * (AdmissionStore.admit). Each is an integer the configuration validated, or NULL.
 */
export function literalsOf(limits: AdmissionLimits): LimitsSql {
  const literal = (name: string, value: number | undefined): string => {
    if (value === undefined) return 'NULL::int';
    if (!Number.isSafeInteger(value)) throw new Error(`admission limit ${name} is not an integer`);
    return `${value}::int`;
  };
  return {
    tenant: literal('tenantMaxRunning', limits.tenantMaxRunning),
    project: literal('projectMaxRunning', limits.projectMaxRunning),
    installation: literal('maxRunning', limits.maxRunning),
  };
}

/** The installation's free slots now (0 when full; NULL without an installation limit). */
const freeSlotsOf = (limits: LimitsSql) =>
  `greatest(0, ${limits.installation} - (SELECT count(*)::int FROM build_admissions
                                           WHERE admitted_at IS NOT NULL AND released_at IS NULL))`;

/**
 * The waiting builds in the order admission takes them, with their position and what holds them
 * back (docs/adr/0042-admission-in-postgres.md). The rule of fair-share.ts in closed form: a
 * tenant's k-th admissible build would run as the tenant's (running + k)-th, so its key is
 * (running + k - 1) / weight; sorting every admissible build by (key, the tenant's last admission,
 * seq) gives the order the rule takes them in one slot at a time. A build is admissible when the
 * running and earlier waiting builds of its project (project_slot) and of its tenant
 * (tenant_slot, counting only builds whose project fits) stay within their limits. Held builds
 * follow, ordered by the same key without limits.
 *
 * `limits`: the tenants' default limit, the projects' and the installation's (null: none), by
 * default the statement's $1, $2 and $3.
 */
export const queueOf = (scope: QueueScope | null, limits: LimitsSql = PARAMETERS) => `
  running AS (
    SELECT tenant_id, project_id, count(*)::int AS n
      FROM build_admissions
     WHERE admitted_at IS NOT NULL AND released_at IS NULL
     GROUP BY tenant_id, project_id
  ),
  -- Scoped: a few per group, joined to the running counts once, not once per group.
  waiting AS ${scope === null ? '' : 'MATERIALIZED '}(
    ${
      scope === null
        ? `SELECT a.build_id, a.tenant_id, a.project_id, a.seq FROM build_admissions a
            WHERE a.admitted_at IS NULL AND a.released_at IS NULL`
        : `SELECT w.build_id, w.tenant_id, w.project_id, w.seq
             FROM (${waitingGroups(scope.by, freeSlotsOf(limits))}) g
            CROSS JOIN LATERAL (
              SELECT a.build_id, a.tenant_id, a.project_id, a.seq FROM build_admissions a
               WHERE a.tenant_id = g.tenant_id
                 ${scope.by === 'project' ? 'AND a.project_id = g.project_id' : ''}
                 AND a.admitted_at IS NULL AND a.released_at IS NULL
               ORDER BY a.seq LIMIT ${freeSlotsOf(limits)}) w`
    }
  ),
  queue AS (
    SELECT a.build_id, a.tenant_id, a.project_id, a.seq, coalesce(r.n, 0) AS project_running,
           coalesce(r.n, 0) + row_number() OVER (PARTITION BY a.tenant_id, a.project_id
                                                 ORDER BY a.seq) AS project_slot,
           row_number() OVER (PARTITION BY a.tenant_id ORDER BY a.seq) AS tenant_rank
      FROM waiting a
      LEFT JOIN running r ON r.tenant_id = a.tenant_id AND r.project_id = a.project_id
  ),
  tenants AS MATERIALIZED (
    SELECT q.tenant_id,
           coalesce(r.n, 0)::int AS running,
           coalesce(s.weight, 1) AS weight,
           coalesce(s.max_running, ${limits.tenant}) AS max_running,
           (SELECT max(l.admitted_at) FROM build_admissions l
             WHERE l.tenant_id = q.tenant_id AND l.admitted_at IS NOT NULL) AS last_admitted_at
      FROM (SELECT DISTINCT tenant_id FROM queue) q
      LEFT JOIN (SELECT tenant_id, sum(n) AS n FROM running GROUP BY tenant_id) r
             ON r.tenant_id = q.tenant_id
      LEFT JOIN tenant_admission_settings s ON s.tenant_id = q.tenant_id
  ),
  fits AS (
    SELECT q.*, t.running, t.weight, t.max_running, t.last_admitted_at,
           (${limits.project} IS NULL OR q.project_slot <= ${limits.project}) AS project_fits
      FROM queue q JOIN tenants t ON t.tenant_id = q.tenant_id
  ),
  slots AS (
    SELECT f.*,
           f.running + row_number() OVER (PARTITION BY f.tenant_id, f.project_fits
                                          ORDER BY f.seq) AS tenant_slot
      FROM fits f
  ),
  held AS (
    SELECT s.*,
           CASE WHEN NOT s.project_fits THEN 'ProjectLimit'
                WHEN s.tenant_slot > s.max_running THEN 'TenantLimit' END AS held_by
      FROM slots s
  ),
  places AS (
    SELECT h.build_id, h.held_by, h.running AS tenant_running, h.max_running AS tenant_max,
           h.project_running, h.tenant_rank::int, (h.project_slot - h.project_running)::int
             AS project_rank,
           row_number() OVER (ORDER BY h.held_by IS NOT NULL,
                                       CASE WHEN h.held_by IS NULL
                                            THEN (h.tenant_slot - 1)::float8 / h.weight
                                            ELSE (h.running + h.tenant_rank - 1)::float8 / h.weight
                                       END,
                                       h.last_admitted_at NULLS FIRST,
                                       h.seq)::int AS position
      FROM held h
  ),
  free AS MATERIALIZED (
    -- Slots the installation has free (null: no limit, and so is this).
    SELECT ${limits.installation} - coalesce(sum(n), 0)::int AS slots FROM running
  )`;

/** The whole queue: every waiting build's place. */
export const QUEUE = queueOf(null);

/** The columns of a place (after `WITH ${QUEUE}`, from places p, free and build_admissions a). */
export const PLACE_COLUMNS = `p.build_id, p.position, p.held_by, free.slots, p.tenant_running,
  p.tenant_max, p.project_running, p.tenant_rank, p.project_rank, a.queued_at,
  (SELECT coalesce(sum(n), 0)::int FROM running) AS running_total`;

/** The queue's generation now (admission_generation; 0 before its first change). */
export const GENERATION = `SELECT (CASE WHEN is_called THEN last_value ELSE 0 END)::text AS generation
  FROM admission_generation`;

/*
 * An admission is stamped with clock_timestamp(), not statement_timestamp(): these statements
 * travel in one message after ADMISSION_LOCK (inOneTrip), and a statement's timestamp in such a
 * message is when the message arrived, before the wait for the lock. A build admitted into a slot
 * that a release freed during that wait would look admitted before the release. The clock is read
 * once per statement (STAMP), so every build one pass admits has the same stamp: clock_timestamp()
 * in SET would be read again for each row.
 */
const STAMP = `stamp AS MATERIALIZED (SELECT clock_timestamp() AS at)`;

/** Ends the wait or run of every build that is no longer in_progress. */
export const SWEEP = `
  UPDATE build_admissions a SET released_at = statement_timestamp()
    FROM builds b
   WHERE b.id = a.build_id AND a.released_at IS NULL AND b.status <> 'in_progress'`;

/** The build method of an admitted row (`admitted`), for kiln_build_wait_seconds. */
const METHOD_OF_ADMITTED = `(SELECT b.spec ->> 'method' FROM builds b WHERE b.id = admitted.build_id)
    AS method`;

/**
 * Admits every waiting build, first started first: admission when nothing is limited. Admits
 * nothing once a tenant has a limit of its own (`admitOf` orders the queue then).
 */
export const ADMIT_ALL = `
  WITH ${STAMP},
  admitted AS (
    UPDATE build_admissions a
       SET admitted_at = stamp.at, reason = NULL, message = NULL
      FROM build_admissions b, stamp
     WHERE b.build_id = a.build_id AND a.admitted_at IS NULL AND a.released_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM tenant_admission_settings WHERE max_running IS NOT NULL)
    RETURNING a.build_id, a.tenant_id, a.project_id, a.queued_at, a.admitted_at, a.seq,
              b.reason AS before
  )
  SELECT build_id, tenant_id, project_id, queued_at, admitted_at, before, ${METHOD_OF_ADMITTED}
    FROM admitted ORDER BY seq`;

/**
 * Admits by fair share what the limits allow (QUEUE, or `scope` of it): the admissible builds
 * the installation's free slots take, in the order taken, each with the reason it waited for.
 */
export const admitOf = (scope: QueueScope | null, limits: LimitsSql) => `
  WITH ${queueOf(scope, limits)},
  chosen AS MATERIALIZED (
    SELECT p.build_id, p.position, b.reason AS before FROM places p
      CROSS JOIN free JOIN build_admissions b ON b.build_id = p.build_id
     WHERE p.held_by IS NULL AND (free.slots IS NULL OR p.position <= free.slots)
  ),
  ${STAMP},
  admitted AS (
    UPDATE build_admissions a
       SET admitted_at = stamp.at, reason = NULL, message = NULL
      FROM chosen c, stamp
     WHERE a.build_id = c.build_id AND a.admitted_at IS NULL AND a.released_at IS NULL
    RETURNING a.build_id, a.tenant_id, a.project_id, a.queued_at, a.admitted_at, c.position,
              c.before
  )
  SELECT build_id, tenant_id, project_id, queued_at, admitted_at, before, ${METHOD_OF_ADMITTED}
    FROM admitted ORDER BY position`;

/** $1, $2, $3 of a QUEUE statement: the tenants' default limit, the projects', the installation's. */
export function parametersOf(
  limits: AdmissionLimits,
): [number | null, number | null, number | null] {
  return [
    limits.tenantMaxRunning ?? null,
    limits.projectMaxRunning ?? null,
    limits.maxRunning ?? null,
  ];
}
