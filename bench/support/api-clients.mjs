// The client side of bench/api.bench.mjs, in its own process (forked by client-process.mjs), so
// the load generator's work never lands in a server's event loop: a login, and autocannon runs.
// Times are CLOCK_MONOTONIC ms (process.hrtime), the clock every process on the machine shares,
// so the bench can pick a server's CPU-profile samples of a run's window.
import { createHash } from 'node:crypto';
import autocannon from 'autocannon';
import { latencySummary, nowMs } from './stats.mjs';
import { answerCommands } from './commands.mjs';

process.on('disconnect', () => process.exit(1));

/** Requests made by create loads in this process: each gets a commit of its own. */
let creates = 0;

/**
 * The body of the next POST /builds: the reference form (project_id, git_branch and an
 * optional git_commit; no manifest to validate, so the cheapest valid create) for the next of
 * `projectIds` in turn. kiln refuses a second queued build of the same project, branch and commit
 * (409), so each request carries a commit no other request of this process used.
 */
function nextCreateBody(projectIds, branch) {
  const n = creates++;
  return JSON.stringify({
    project_id: projectIds[n % projectIds.length],
    git_branch: branch,
    git_commit: createHash('sha1').update(`${branch}:${n}`).digest('hex'),
  });
}

const commands = {
  async login({ baseUrl, email, password }) {
    const response = await fetch(`${baseUrl}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`login gave ${response.status}: ${text}`);
    return JSON.parse(text).access_token;
  },

  /**
   * One autocannon run of `seconds` on `connections` keep-alive connections: GET `path`, or with
   * `create` ({ projectIds, branch }) POST `path` with a fresh body each request. Returns the
   * answers by status, socket errors and timeouts, the latency of the 2xx answers (ms, exact:
   * autocannon's own histogram keeps whole ms), its window [t0, t1] and its own CPU time.
   */
  async load({ baseUrl, path, headers, connections, seconds, create }) {
    const requests =
      create === undefined
        ? undefined
        : [
            {
              method: 'POST',
              path,
              headers: { ...headers, 'content-type': 'application/json' },
              setupRequest: (request) => ({
                ...request,
                body: nextCreateBody(create.projectIds, create.branch),
              }),
            },
          ];
    const latencies = [];
    const cpuBefore = process.cpuUsage();
    const t0 = nowMs();
    const run = autocannon({
      url: `${baseUrl}${path}`,
      headers,
      connections,
      duration: seconds,
      ...(requests === undefined ? {} : { requests }),
    });
    run.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    });
    const result = await run;
    const t1 = nowMs();
    const cpu = process.cpuUsage(cpuBefore);
    const statuses = {};
    for (const [code, { count }] of Object.entries(result.statusCodeStats)) statuses[code] = count;
    return {
      t0,
      t1,
      ok: latencies.length,
      non2xx: result.non2xx,
      statuses,
      errors: result.errors,
      timeouts: result.timeouts,
      latency: latencySummary(latencies),
      cpuMs: (cpu.user + cpu.system) / 1000,
    };
  },
};

answerCommands(commands);
