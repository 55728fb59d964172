import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

export interface ThrottleState {
  readonly failures: number;
  readonly windowStartedAt: Date;
}

/**
 * Failed-login counters in Postgres, so every API replica enforces the same limit.
 * A fixed window per key: the first failure after a window ends starts a new one.
 */
@Injectable()
export class LoginThrottleRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** The failures counted in the window still open at `now`; undefined when there is none. */
  async current(key: string, windowSeconds: number, now: Date): Promise<ThrottleState | undefined> {
    const rows = await this.dataSource.query<Array<{ failures: number; window_started_at: Date }>>(
      `SELECT failures, window_started_at FROM login_throttle
        WHERE key = $1 AND window_started_at > $2::timestamptz - make_interval(secs => $3)`,
      [key, now.toISOString(), windowSeconds],
    );
    const row = rows[0];
    return row && { failures: row.failures, windowStartedAt: row.window_started_at };
  }

  async recordFailure(key: string, windowSeconds: number, now: Date): Promise<ThrottleState> {
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
    return { failures: row.failures, windowStartedAt: row.window_started_at };
  }

  async clear(key: string): Promise<void> {
    await this.dataSource.query('DELETE FROM login_throttle WHERE key = $1', [key]);
  }
}
