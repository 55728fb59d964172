import { isAbsolute, resolve } from 'node:path';
import type { EnvReader } from './reader.js';

/** Where kiln keeps its state: the data directory, and the database unless it is embedded there. */
export function readDatabase(read: EnvReader, cwd: string) {
  const rawDataDir = read.value('KILN_DATA_DIR') ?? '.kiln';
  const dataDir = isAbsolute(rawDataDir) ? rawDataDir : resolve(cwd, rawDataDir);
  const databaseUrl = read.value('DATABASE_URL');
  if (databaseUrl !== undefined && !isPostgresUrl(databaseUrl)) {
    // Not quoted: the URL may hold the database's password.
    read.bad(
      'DATABASE_URL',
      'a postgres:// or postgresql:// URL (unset it to use the embedded PostgreSQL)',
    );
  }
  return { dataDir, databaseUrl };
}

function isPostgresUrl(raw: string): boolean {
  try {
    const url = new URL(raw);
    return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '';
  } catch {
    return false;
  }
}
