// CPU time of processes read from /proc (Linux), for the benches' CPU-per-request figures.
import { readdir, readFile } from 'node:fs/promises';

/** CPU time (user + system) of a process, in ms, from /proc. */
export async function cpuMsOf(pid) {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in 1/100 s
}

/**
 * CPU time of the embedded PostgreSQL whose directory is `dir` (startPostgres), in ms: the
 * postmaster, its live backends, and the backends that have exited (the postmaster's reaped
 * children: cutime, cstime), so that a connection closed between two samples keeps its time.
 */
export async function postgresCpuMs(dir) {
  const postmaster = Number(
    (await readFile(`${dir}/data/postgres/postmaster.pid`, 'utf8')).split('\n')[0],
  );
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (stat === '') continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(entry) === postmaster || Number(fields[1]) === postmaster)
      total += ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
    if (Number(entry) === postmaster)
      total += ((Number(fields[13]) + Number(fields[14])) * 1000) / 100; // cutime, cstime
  }
  return total;
}
