import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

@Injectable()
export class RateLimitRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Counts one request in the key's window and returns the count so far. */
  async increment(key: string, windowStart: Date): Promise<number> {
    const rows = await this.dataSource.query<Array<{ count: number }>>(
      `INSERT INTO rate_limit_windows AS w (key, window_start, count) VALUES ($1, $2, 1)
       ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + 1
       RETURNING count`,
      [key, windowStart.toISOString()],
    );
    return rows[0]?.count ?? 1;
  }

  /**
   * Adds each key's count to its row of the window in one statement and returns each key's total:
   * what all replicas have written so far. Rows are locked in key order, so two replicas writing
   * overlapping keys at once wait for each other instead of deadlocking.
   */
  async add(windowStart: Date, counts: ReadonlyMap<string, number>): Promise<Map<string, number>> {
    const rows = await this.dataSource.query<Array<{ key: string; count: number }>>(
      `INSERT INTO rate_limit_windows AS w (key, window_start, count)
       SELECT key, $2::timestamptz, count
         FROM unnest($1::text[], $3::int[]) AS d(key, count) ORDER BY key
       ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + EXCLUDED.count
       RETURNING key, count`,
      [[...counts.keys()], windowStart.toISOString(), [...counts.values()]],
    );
    return new Map(rows.map((row) => [row.key, row.count]));
  }

  /** Drops windows that ended before `before`. */
  async prune(before: Date): Promise<void> {
    await this.dataSource.query('DELETE FROM rate_limit_windows WHERE window_start < $1', [
      before.toISOString(),
    ]);
  }
}
