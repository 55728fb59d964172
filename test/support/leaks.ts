import type { DataSource } from 'typeorm';

/**
 * Every row of every table of kiln's database, as text: what a test searches for a value that
 * must never be stored (a resolved secret, a credential).
 */
export async function databaseText(dataSource: Pick<DataSource, 'query'>): Promise<string> {
  const tables: Array<{ name: string }> = await dataSource.query(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'`,
  );
  // One table after another: `dataSource` may be a single connection (a pg.Client), which runs
  // one query at a time.
  const texts: string[] = [];
  for (const { name } of tables) {
    const rows: Array<{ text: string }> = await dataSource.query(
      `SELECT t::text AS text FROM "${name}" t`,
    );
    texts.push(rows.map((row) => row.text).join('\n'));
  }
  return texts.join('\n');
}
