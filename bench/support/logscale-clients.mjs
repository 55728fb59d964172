// The client side of bench/logscale.bench.mjs, in its own process as bench/support/clients.mjs
// is for bench/logs.bench.mjs (started with client-process.mjs). clients.mjs's `pages` reads at
// random offsets; this bench reads at one chosen offset (the end of the largest log) and keeps a
// reader paging through a build while builds are deleted. Times are process.hrtime ms: one
// monotonic clock for every process on the machine, so the bench lines them up with its own.
import pg from 'pg';
import { delay, latencySummary, nowMs } from './stats.mjs';

let reader;

/** GET …/logs over HTTP to the last byte; returns ms, or throws unless `limit` lines came. */
async function pageViaKiln({ baseUrl, headers, buildId, offset, limit }) {
  const begin = nowMs();
  const response = await fetch(
    `${baseUrl}/api/v1/builds/${buildId}/logs?offset=${offset}&limit=${limit}`,
    { headers },
  );
  const body = await response.text();
  const took = nowMs() - begin;
  if (response.status !== 200 || JSON.parse(body).logs.length !== limit)
    throw new Error(`page at ${offset} gave ${response.status}: ${body.slice(0, 200)}`);
  return took;
}

const commands = {
  /**
   * Times `samples` reads of one page per target (`buildId` from `offset`, `limit` lines) through
   * kiln and through pg (`sql`, the repository's SELECT, with $1 the build and $2 the offset),
   * as clients.mjs's `pages` does, every sample reading each target both ways in a rotating
   * order, so drift in machine load touches each alike. Returns { [target name]: { kiln, raw } }.
   */
  async endPages({ targets, limit, sql, samples, warmup }) {
    const clients = [];
    try {
      const reads = [];
      const times = {};
      for (const target of targets) {
        const client = new pg.Client({ connectionString: target.databaseUrl });
        client.on('error', () => undefined);
        await client.connect();
        clients.push(client);
        const page = { ...target, limit };
        const viaSql = async () => {
          const begin = nowMs();
          const result = await client.query(sql, [target.buildId, target.offset]);
          const took = nowMs() - begin;
          if (result.rowCount !== limit)
            throw new Error(`raw page at ${target.offset}: ${result.rowCount} rows`);
          return took;
        };
        times[target.name] = { kiln: [], raw: [] };
        reads.push({ times: times[target.name].kiln, read: () => pageViaKiln(page) });
        reads.push({ times: times[target.name].raw, read: viaSql });
      }
      for (let i = 0; i < warmup; i++) for (const { read } of reads) await read();
      for (let i = 0; i < samples; i++) {
        for (let k = 0; k < reads.length; k++) {
          const { times: into, read } = reads[(i + k) % reads.length];
          into.push(await read());
        }
      }
      return Object.fromEntries(
        Object.entries(times).map(([name, t]) => [
          name,
          { kiln: latencySummary(t.kiln), raw: latencySummary(t.raw) },
        ]),
      );
    } finally {
      for (const client of clients) await client.end();
    }
  },

  /**
   * Starts paging through a build of `lines` lines over HTTP, page after page (wrapping), one
   * request every `intervalMs` (less the time the last took), until stopReader.
   */
  startReader({ baseUrl, headers, buildId, lines, limit, intervalMs }) {
    const calls = [];
    const state = { stop: false, calls, failure: undefined };
    state.done = (async () => {
      for (let offset = 0; !state.stop; offset = (offset + limit) % (lines - limit + 1)) {
        const begin = nowMs();
        const took = await pageViaKiln({ baseUrl, headers, buildId, offset, limit });
        calls.push([begin, took]);
        await delay(Math.max(0, intervalMs - took));
      }
    })().catch((error) => {
      state.failure = error instanceof Error ? error.message : String(error);
    });
    reader = state;
    return Promise.resolve({ started: true });
  },

  /** Stops the reader; returns each call as [start ms, duration ms]. */
  async stopReader() {
    reader.stop = true;
    await reader.done;
    const { calls, failure } = reader;
    reader = undefined;
    if (failure !== undefined) throw new Error(`reader failed: ${failure}`);
    return calls;
  },
};

process.on('message', ({ id, command, args }) => {
  commands[command](args).then(
    (result) => process.send({ id, result }),
    (error) => process.send({ id, error: error instanceof Error ? error.message : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
