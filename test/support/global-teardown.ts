import { rm } from 'node:fs/promises';
import type { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';

export default async function globalTeardown(): Promise<void> {
  const server = (globalThis as { __kilnTestPostgres?: EmbeddedPostgres }).__kilnTestPostgres;
  await server?.stop();
  const dir = process.env['KILN_TEST_POSTGRES_DIR'];
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}
