import { readdir, readFile, rm } from 'node:fs/promises';
import pg from 'pg';

/** Where benches keep their embedded PostgreSQL clusters: `<ROOT>/<PREFIX><pid>-…`. */
export const ROOT = '/dev/shm';
export const PREFIX = 'kiln-bench-';

/**
 * pg-pool's end() returns before its clients have disconnected; stopping the server then makes
 * each of them log a lost connection. Wait (up to 3 s) until no other client is connected.
 */
export async function untilNoClients(url) {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    for (let tries = 0; tries < 60; tries++) {
      const { rows } = await client.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      if (rows[0].n === 0) return;
      await new Promise((done) => setTimeout(done, 50));
    }
  } finally {
    await client.end();
  }
}

/**
 * A bench killed with SIGKILL never cleans up: stop its server and drop its directory. `root`
 * and `prefix` name where the bench keeps its runs (the logscale bench keeps them on disk).
 */
export async function removeLeftoversOfKilledRuns(root = ROOT, prefix = PREFIX) {
  for (const entry of await readdir(root)) {
    if (!entry.startsWith(prefix)) continue;
    const pid = Number(entry.slice(prefix.length).split('-')[0]);
    if (!Number.isInteger(pid) || isAlive(pid)) continue;
    const postmaster = await readFile(
      `${root}/${entry}/data/postgres/postmaster.pid`,
      'utf8',
    ).catch(() => '');
    const serverPid = Number(postmaster.split('\n')[0]);
    if (serverPid > 0 && isAlive(serverPid)) process.kill(serverPid, 'SIGQUIT');
    await rm(`${root}/${entry}`, { recursive: true, force: true });
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}
