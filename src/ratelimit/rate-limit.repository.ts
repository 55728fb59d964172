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

  /** Drops windows that ended before `before`. */
  async prune(before: Date): Promise<void> {
    await this.dataSource.query('DELETE FROM rate_limit_windows WHERE window_start < $1', [
      before.toISOString(),
    ]);
  }
}
