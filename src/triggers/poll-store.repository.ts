import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { Metrics } from '../metrics/metrics.js';
import type { PollStore, PollTarget } from './poller.js';

/** The polling state of triggers (PollStore): when each is due, and the refs it last saw. */
@Injectable()
export class PollStoreRepository implements PollStore {
  constructor(
    private readonly dataSource: DataSource,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Moves each due trigger's next poll on by its interval as it claims it: another replica finds
   * it not due. A trigger whose project lost its repository URL is claimed and told so.
   */
  async claimDue(limit: number): Promise<PollTarget[]> {
    const [rows] = await this.dataSource.query<[Array<Record<string, unknown>>, number]>(
      `UPDATE triggers t
          SET next_poll_at = now() + make_interval(secs => t.poll_interval_seconds)
         FROM (SELECT id FROM triggers
                WHERE next_poll_at <= now() AND enabled AND poll_interval_seconds IS NOT NULL
                ORDER BY next_poll_at LIMIT $1 FOR UPDATE SKIP LOCKED) due, projects p
        WHERE t.id = due.id AND p.id = t.project_id
       RETURNING t.id, t.tenant_id, t.project_id, t.poll_interval_seconds,
                 p.git_repository_url`,
      [limit],
    );
    const targets: PollTarget[] = [];
    for (const row of rows) {
      const url = row.git_repository_url as string | null;
      if (url === null) {
        await this.recordFailure(row.id as string, 'the project has no git repository URL to poll');
        continue;
      }
      targets.push({
        triggerId: row.id as string,
        tenantId: row.tenant_id as string,
        projectId: row.project_id as string,
        repositoryUrl: url,
        intervalSeconds: row.poll_interval_seconds as number,
      });
    }
    return targets;
  }

  async knownRefs(triggerId: string): Promise<ReadonlyMap<string, string> | null> {
    const polled: Array<{ last_polled_at: Date | null }> = await this.dataSource.query(
      'SELECT last_polled_at FROM triggers WHERE id = $1',
      [triggerId],
    );
    if (polled.length === 0 || polled[0]!.last_polled_at === null) return null;
    const rows: Array<{ ref: string; commit: string }> = await this.dataSource.query(
      'SELECT ref, commit FROM trigger_refs WHERE trigger_id = $1',
      [triggerId],
    );
    return new Map(rows.map((row) => [row.ref, row.commit]));
  }

  async saveRefs(triggerId: string, refs: ReadonlyMap<string, string>): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.query('DELETE FROM trigger_refs WHERE trigger_id = $1', [triggerId]);
      await manager.query(
        `INSERT INTO trigger_refs (trigger_id, ref, commit)
         SELECT $1, ref, commit FROM unnest($2::text[], $3::text[]) AS r(ref, commit)`,
        [triggerId, [...refs.keys()], [...refs.values()]],
      );
      await manager.query(
        'UPDATE triggers SET last_polled_at = now(), poll_error = NULL WHERE id = $1',
        [triggerId],
      );
    });
    this.metrics.inc('kiln_trigger_polls_total', { result: 'success' });
  }

  async recordFailure(triggerId: string, message: string): Promise<void> {
    await this.dataSource.query('UPDATE triggers SET poll_error = $2 WHERE id = $1', [
      triggerId,
      message.slice(0, 2000),
    ]);
    this.metrics.inc('kiln_trigger_polls_total', { result: 'error' });
  }
}
