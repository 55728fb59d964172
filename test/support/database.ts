import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const TEMPLATE_DATABASE = 'kiln_template';

export interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

function serverUrl(database: string): string {
  const base = process.env['KILN_TEST_POSTGRES_URL'];
  if (base === undefined)
    throw new Error('KILN_TEST_POSTGRES_URL is unset: run the tests through jest');
  const url = new URL(base);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A fresh migrated database for one test file: a clone of the template made in global setup. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `kiln_t${process.env['JEST_WORKER_ID'] ?? '0'}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE ${TEMPLATE_DATABASE}`);
  } finally {
    await admin.end();
  }
  return {
    url: serverUrl(name),
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl('postgres') });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
