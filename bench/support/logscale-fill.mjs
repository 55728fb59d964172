// The builds and log lines bench/logscale.bench.mjs stores before it measures anything: written
// with INSERT … SELECT generate_series, as concurrent builds would write them through LogSink.
import { prng } from './log-lines.mjs';
import { int, nowMs } from './stats.mjs';

/**
 * Line counts of `builds` builds holding `totalLines` in all: the largest first (`largestShare`
 * of the lines), then the one the append bench writes to (`targetShare`), then the rest spread
 * evenly between 0.5× and 1.5× their mean (deterministic, so every run stores the same).
 */
export function planSizes(totalLines, builds, { largestShare, targetShare }) {
  const largest = Math.round(totalLines * largestShare);
  const target = Math.round(totalLines * targetShare);
  const random = prng(3);
  const weights = Array.from({ length: builds - 2 }, () => 0.5 + random());
  const sum = weights.reduce((a, b) => a + b, 0);
  const rest = totalLines - largest - target;
  const sizes = weights.map((w) => Math.floor((rest * w) / sum));
  let left = rest - sizes.reduce((a, b) => a + b, 0);
  for (let i = 0; left > 0; i++, left--) sizes[i]++;
  return [largest, target, ...sizes];
}

/**
 * `count` finished builds copied from the build `templateId` (its tenant, project, config and
 * spec), numbered from the project's counter as kiln numbers builds; returns their ids in order.
 */
export async function createBuilds(client, templateId, count) {
  const { rows } = await client.query(
    `WITH numbers AS (
       UPDATE projects p SET next_build_number = next_build_number + $2::int
         FROM builds b WHERE b.id = $1 AND p.id = b.project_id AND p.tenant_id = b.tenant_id
       RETURNING p.next_build_number - $2::int AS first)
     INSERT INTO builds (tenant_id, project_id, build_number, status, git_branch, method, config,
                         spec, created_by, started_at, completed_at)
     SELECT b.tenant_id, b.project_id, numbers.first + g, 'success', 'scale-' || g, b.method,
            b.config, b.spec, b.created_by, now(), now()
       FROM builds b, numbers, generate_series(0, $2::int - 1) AS g
      WHERE b.id = $1
     RETURNING id, build_number`,
    [templateId, count],
  );
  return rows.sort((a, b) => a.build_number - b.build_number).map((row) => row.id);
}

/**
 * One round: the next `n` lines (from seq `first`) of each build listed, each build's lines
 * together, with its build_logs counters, as one append per build does. The text is builder
 * output of ~90 B, as bench/logs.bench.mjs's page section writes.
 */
const ROUND = `
  WITH stored AS (
    INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
    SELECT p.build_id, s, $4::timestamptz + (s - p.first) * interval '1 millisecond',
           CASE WHEN s % 97 = 0 THEN 'WARN' ELSE 'INFO' END,
           '#' || (5 + s % 9) || ' ' || to_char(s / 400.0, 'FM9999990.000') ||
             ' npm http fetch GET 200 https://registry.npmjs.org/package-' || s ||
             ' ' || (s % 997) || 'ms (cache miss)',
           CASE WHEN s % 10 = 0 THEN jsonb_build_object('vertex', (5 + s % 9)::text) END
      FROM unnest($1::uuid[], $2::int[], $3::int[]) AS p(build_id, first, n),
           generate_series(p.first, p.first + p.n - 1) AS s
    RETURNING build_id, octet_length(message) AS bytes)
  INSERT INTO build_logs (build_id, lines, bytes)
  SELECT build_id, count(*), sum(bytes) FROM stored GROUP BY build_id
  ON CONFLICT (build_id) DO UPDATE
     SET lines = build_logs.lines + EXCLUDED.lines, bytes = build_logs.bytes + EXCLUDED.bytes`;

/**
 * Stores `sizes[i]` lines for build `ids[i]` as `lanes` builds running at a time would: each lane
 * runs its builds one after another (the largest builds placed first, each on the lane with the
 * fewest lines so far), and every round adds `batch` lines to each lane's current build, so
 * concurrent builds' batches interleave in the table as LogSink's appends do.
 *
 * With `probe` ({ client, ids, every }), every `every`th round is followed by a round of the same
 * shape into another database (builds `probe.ids`, one a lane), emptied again each tenth: what the
 * same insert costs on a small table at the same moment, whatever else the machine does then.
 * Reports progress on stderr every tenth; returns the fill's wall time and, per tenth, its rate
 * and the probe's (lines over the statements' own time).
 */
export async function fill(client, { ids, sizes, lanes, batch, label, probe }) {
  const queues = Array.from({ length: lanes }, () => ({ builds: [], lines: 0 }));
  const bySize = ids.map((_, i) => i).sort((a, b) => sizes[b] - sizes[a]);
  for (const i of bySize) {
    const lane = queues.reduce((least, q) => (q.lines < least.lines ? q : least));
    lane.builds.push(i);
    lane.lines += sizes[i];
  }
  const cursors = queues.map((q) => ({ builds: q.builds, at: 0, done: 0 }));
  const total = sizes.reduce((a, b) => a + b, 0);
  const tenth = Math.ceil(total / 10);
  const tenths = [];
  const began = nowMs();
  const start = Date.now() - 86_400_000;
  const timedRound = async (on, args) => {
    const begin = nowMs();
    await on.query(ROUND, args);
    return nowMs() - begin;
  };
  let current = { lines: 0, ms: 0, probeLines: 0, probeMs: 0 };
  let stored = 0;
  let probeSeq = 0;
  for (let round = 0; ; round++) {
    const build = [];
    const first = [];
    const count = [];
    for (const cursor of cursors) {
      while (cursor.at < cursor.builds.length && cursor.done === sizes[cursor.builds[cursor.at]]) {
        cursor.at++;
        cursor.done = 0;
      }
      if (cursor.at === cursor.builds.length) continue;
      const i = cursor.builds[cursor.at];
      const n = Math.min(batch, sizes[i] - cursor.done);
      build.push(ids[i]);
      first.push(cursor.done);
      count.push(n);
      cursor.done += n;
    }
    if (build.length === 0) break;
    const ts = new Date(start + round * 1000).toISOString();
    const lines = count.reduce((a, b) => a + b, 0);
    current.ms += await timedRound(client, [build, first, count, ts]);
    current.lines += lines;
    stored += lines;
    if (probe !== undefined && round % probe.every === 0) {
      const same = (value) => probe.ids.map(() => value);
      current.probeMs += await timedRound(probe.client, [
        probe.ids,
        same(probeSeq),
        same(batch),
        ts,
      ]);
      current.probeLines += probe.ids.length * batch;
      probeSeq += batch;
    }
    if (stored >= (tenths.length + 1) * tenth || stored === total) {
      tenths.push(current);
      current = { lines: 0, ms: 0, probeLines: 0, probeMs: 0 };
      const rate = (stored * 1000) / (nowMs() - began);
      process.stderr.write(`  ${label}: ${int(stored)} of ${int(total)} lines, ${int(rate)}/s\n`);
      if (probe !== undefined) {
        await probe.client.query('TRUNCATE build_log_lines, build_logs');
        probeSeq = 0;
      }
    }
  }
  return {
    lines: total,
    seconds: (nowMs() - began) / 1000,
    tenths: tenths.map((t) => ({
      rate: (t.lines * 1000) / t.ms,
      probeRate: (t.probeLines * 1000) / t.probeMs,
    })),
  };
}
