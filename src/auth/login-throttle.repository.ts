import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

export interface ThrottleState {
  /** Attempts counted in the window so far, this one included. */
  readonly attempts: number;
  readonly windowStartedAt: Date;
}

/**
 * Login attempt counters in Postgres, so every API replica enforces the same limit. A fixed window
 * per key: the first attempt after a window ends starts a new one; a successful login deletes the
 * key. (The column is `failures`: once successes clear it, what it holds are failed attempts and
 * those still being checked.)
 */
@Injectable()
export class LoginThrottleRepository {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Counts one attempt and returns the count, in one statement: parallel attempts each get their
   * own number, so no more than the limit of them can be let through to the password check.
   */
  async countAttempt(key: string, windowSeconds: number, now: Date): Promise<ThrottleState> {
    const rows = await this.dataSource.query<Array<{ failures: number; window_started_at: Date }>>(
      `INSERT INTO login_throttle AS t (key, failures, window_started_at) VALUES ($1, 1, $2)
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN t.window_started_at > $2::timestamptz - make_interval(secs => $3)
                         THEN t.failures + 1 ELSE 1 END,
         window_started_at = CASE WHEN t.window_started_at > $2::timestamptz - make_interval(secs => $3)
                                  THEN t.window_started_at ELSE $2 END
       RETURNING failures, window_started_at`,
      [key, now.toISOString(), windowSeconds],
    );
    const row = rows[0]!;
    return { attempts: row.failures, windowStartedAt: row.window_started_at };
  }

  async clear(key: string): Promise<void> {
    await this.dataSource.query('DELETE FROM login_throttle WHERE key = $1', [key]);
  }
}
