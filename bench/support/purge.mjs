import { delay } from './stats.mjs';

/** Waits until LogPurger has taken every line of these deleted builds. */
export async function purged(raw, ids) {
  for (;;) {
    const { rows } = await raw.query(
      'SELECT count(*)::int AS n FROM build_log_purges WHERE build_id = ANY($1::uuid[])',
      [ids],
    );
    if (rows[0].n === 0) return;
    await delay(100);
  }
}
