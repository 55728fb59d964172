import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { Metrics } from '../../metrics/metrics.js';
import type { CommitState, GitProvider } from './commit-status.js';
import type { StatusJob, StatusStore } from './status-reporter.js';

/** How long a claimed build is left to the replica posting its status. */
const CLAIM_SECONDS = 120;

/**
 * What a build's commit should show, from its state: a started build that still waits for
 * admission is pending, an admitted one running.
 */
const DESIRED = `
  CASE b.status
    WHEN 'queued' THEN 'pending'
    WHEN 'success' THEN 'success'
    WHEN 'failed' THEN 'failure'
    WHEN 'cancelled' THEN 'error'
    ELSE CASE WHEN EXISTS (
           SELECT 1 FROM build_admissions a
            WHERE a.build_id = b.id AND a.admitted_at IS NULL AND a.released_at IS NULL)
         THEN 'pending' ELSE 'running' END
  END`;

/**
 * The commit-status bookkeeping on builds (StatusStore, docs/adr/0053-triggers.md). The desired
 * state is not stored: it is read from the build's state each time, so nothing has to remember
 * to change it. `status_attempted` names the state the failed attempts were at; when the desired
 * state moves on, the count starts afresh and the build is due at once.
 */
@Injectable()
export class StatusStoreRepository implements StatusStore {
  /** The provider of each build claimed and not yet settled, for kiln_commit_status_posts_total. */
  private readonly providers = new Map<string, GitProvider>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly metrics: Metrics,
  ) {}

  private count(buildId: string, result: 'posted' | 'retry' | 'gave_up'): void {
    const provider = this.providers.get(buildId);
    this.providers.delete(buildId);
    if (provider !== undefined)
      this.metrics.inc('kiln_commit_status_posts_total', { provider, result });
  }

  async due(limit: number): Promise<StatusJob[]> {
    const [rows] = await this.dataSource.query<[Array<Record<string, unknown>>, number]>(
      `WITH candidates AS (
         SELECT b.id, ${DESIRED} AS desired
           FROM builds b JOIN triggers t ON t.id = b.trigger_id
          WHERE b.trigger_id IS NOT NULL
            AND (b.status_posted IS NULL OR b.status_posted IN ('pending', 'running'))
            AND t.status_target IS NOT NULL AND b.git_commit IS NOT NULL
            AND (b.status_claimed_until IS NULL OR b.status_claimed_until < now())
       ), due AS (
         SELECT b.id, c.desired FROM builds b JOIN candidates c ON c.id = b.id
          WHERE c.desired IS DISTINCT FROM b.status_posted
            AND (b.status_attempted IS DISTINCT FROM c.desired
                 OR b.status_next_at IS NULL OR b.status_next_at <= now())
          ORDER BY b.created_at
          LIMIT $1
          FOR UPDATE OF b SKIP LOCKED
       )
       UPDATE builds b
          SET status_claimed_until = now() + interval '${CLAIM_SECONDS} seconds',
              status_attempts = CASE WHEN b.status_attempted = due.desired
                                     THEN b.status_attempts ELSE 0 END,
              status_attempted = due.desired
         FROM due, triggers t
        WHERE b.id = due.id AND t.id = b.trigger_id
       RETURNING b.id, b.tenant_id, b.git_commit, b.build_number, b.status_posted,
                 b.status_attempts, due.desired, t.provider, t.status_target`,
      [limit],
    );
    for (const row of rows) this.providers.set(row.id as string, row.provider as GitProvider);
    return rows.map((row) => {
      const target = row.status_target as {
        api_url: string;
        repository: string;
        token: string;
        context: string;
      };
      return {
        buildId: row.id as string,
        tenantId: row.tenant_id as string,
        provider: row.provider as GitProvider,
        target: {
          apiUrl: target.api_url,
          repository: target.repository,
          context: target.context,
          token: target.token,
        },
        sha: row.git_commit as string,
        desired: row.desired as CommitState,
        posted: (row.status_posted as CommitState | null) ?? null,
        attempts: row.status_attempts as number,
        buildNumber: row.build_number as number,
      };
    });
  }

  async posted(buildId: string, state: CommitState): Promise<void> {
    await this.dataSource.query(
      `UPDATE builds SET status_posted = $2, status_attempted = NULL, status_attempts = 0,
              status_next_at = NULL, status_claimed_until = NULL, status_error = NULL
        WHERE id = $1`,
      [buildId, state],
    );
    this.count(buildId, 'posted');
  }

  async failed(
    buildId: string,
    state: CommitState,
    attempts: number,
    nextAt: Date,
    error: string,
  ): Promise<void> {
    await this.dataSource.query(
      `UPDATE builds SET status_attempts = CASE WHEN status_attempted = $2 THEN $3 ELSE 0 END,
              status_next_at = $4, status_error = $5, status_claimed_until = NULL
        WHERE id = $1`,
      [buildId, state, attempts, nextAt, error],
    );
    this.count(buildId, 'retry');
  }

  async gaveUp(buildId: string, state: CommitState, error: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE builds SET status_attempted = $2, status_next_at = 'infinity', status_error = $3,
              status_claimed_until = NULL
        WHERE id = $1`,
      [buildId, state, error],
    );
    this.count(buildId, 'gave_up');
  }
}
