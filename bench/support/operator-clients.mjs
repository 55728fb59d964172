// The client side of bench/operator.bench.mjs, in its own process (as CI systems calling kiln, or
// another controller creating Jobs, would be): kiln's REST API, and the baseline that creates Jobs
// straight through @kubernetes/client-node. Times are CLOCK_MONOTONIC ms (process.hrtime), the
// clock every process on the machine shares, so the bench compares them with its own.
// eslint-disable-next-line no-restricted-imports -- the baseline is client-node itself, unwrapped
import * as k8s from '@kubernetes/client-node';
import { nowMs } from './stats.mjs';

process.on('disconnect', () => process.exit(1));

async function request(baseUrl, headers, method, path, body) {
  const response = await fetch(`${baseUrl}/api/v1${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} gave ${response.status}: ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

/** Runs `work(i)` for i in [0, count) on `concurrency` lanes; returns the results in order. */
async function lanes(count, concurrency, work) {
  const results = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      for (let i = next++; i < count; i = next++) results[i] = await work(i);
    }),
  );
  return results;
}

const commands = {
  async login({ baseUrl, email, password }) {
    const { access_token: token } = await request(baseUrl, {}, 'POST', '/auth/login', {
      email,
      password,
    });
    return token;
  },

  /** Creates `count` reference-form builds (queued: their Build resources are suspended). */
  createBuilds({ baseUrl, headers, projectId, count, concurrency, branch }) {
    return lanes(count, concurrency, async (i) => {
      const created = await request(baseUrl, headers, 'POST', '/builds', {
        project_id: projectId,
        git_branch: `${branch}-${i}`,
      });
      return created.id;
    });
  },

  /** POST /builds/{id}/start for each id; t0 = the first request sent, t1 = the last answer. */
  async startBuilds({ baseUrl, headers, ids, concurrency }) {
    const t0 = nowMs();
    await lanes(ids.length, concurrency, (i) =>
      request(baseUrl, headers, 'POST', `/builds/${ids[i]}/start`),
    );
    return { t0, t1: nowMs() };
  },

  /** BatchV1Api.createNamespacedJob for each body; t0 = the first request sent. */
  async createJobs({ server, namespace, bodies, concurrency }) {
    const config = new k8s.KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'bench', server, skipTLSVerify: true }],
      users: [{ name: 'bench', token: 'bench' }],
      contexts: [{ name: 'bench', cluster: 'bench', user: 'bench', namespace }],
      currentContext: 'bench',
    });
    const batch = config.makeApiClient(k8s.BatchV1Api);
    const t0 = nowMs();
    await lanes(bodies.length, concurrency, (i) =>
      batch.createNamespacedJob({ namespace, body: bodies[i] }),
    );
    return { t0, t1: nowMs() };
  },
};

process.on('message', ({ id, command, args }) => {
  Promise.resolve()
    .then(() => commands[command](args))
    .then(
      (result) => process.send({ id, result }),
      (error) => process.send({ id, error: String(error?.stack ?? error) }),
    );
});
