// make bench → webhooks: how fast kiln answers a git host's delivery (issue 33: "every delivery
// answered within a second"), and how long until its build exists. A GitHub push, signed with the
// trigger's secret, is delivered over HTTP: one at a time, then 8 at a time, then one of GitHub's
// largest (25 MiB). The baseline, measured in the same run on the same server, is the synchronous
// way to the same build: POST /api/v1/builds (reference form) with a bearer token. Goals are
// reported, never asserted: a missed goal prints MISSED and the exit status stays 0.
// WEBHOOK_BENCH_DELIVERIES (500) sets how many deliveries each sequential section sends.
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { request, startKiln } from './support/kiln.mjs';
import { delay, latencySummary, ms, nowMs, ratio, verdict } from './support/stats.mjs';

const DELIVERIES = Number(process.env.WEBHOOK_BENCH_DELIVERIES ?? 500);
const CONCURRENCY = 8;
const GOAL_MS = 1000;
const LARGEST_BYTES = 25 * 1024 * 1024;

const sha = () => randomBytes(20).toString('hex');

function pushPayload(after, commits = []) {
  return {
    ref: 'refs/heads/main',
    before: '0'.repeat(40),
    after,
    created: false,
    deleted: false,
    forced: false,
    repository: { full_name: 'bench/app', clone_url: 'https://git.example.com/bench/app.git' },
    pusher: { name: 'bench', email: 'bench@example.com' },
    sender: { login: 'bench' },
    head_commit: {
      id: after,
      message: 'bench',
      author: { name: 'Bench', email: 'bench@example.com' },
      added: [],
      modified: ['README.md'],
      removed: [],
    },
    commits,
  };
}

/** A commit of the payload GitHub lists, with files enough to make a payload large. */
function commitWithFiles(files) {
  return {
    id: sha(),
    message: 'a change',
    author: { name: 'Bench', email: 'bench@example.com' },
    added: [],
    modified: Array.from({ length: files }, (_, i) => `services/api/module-${i}/file.ts`),
    removed: [],
  };
}

function delivery(secret, payload) {
  const body = Buffer.from(JSON.stringify(payload));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/bench',
      'x-github-event': 'push',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
    },
  };
}

/** Times one request: `prepare` makes it (payload, signature) before the clock starts. */
async function timed(prepare) {
  const { url, init } = prepare();
  const begin = nowMs();
  const response = await fetch(url, init);
  const took = nowMs() - begin;
  await response.arrayBuffer();
  if (response.status >= 400) throw new Error(`${url} answered ${response.status}`);
  return took;
}

async function sequential(n, prepare) {
  const took = [];
  for (let i = 0; i < n; i++) took.push(await timed(prepare));
  return latencySummary(took);
}

async function concurrent(n, workers, prepare) {
  const took = [];
  let left = n;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (left-- > 0) took.push(await timed(prepare));
    }),
  );
  return latencySummary(took);
}

function line(name, kiln, baseline) {
  console.log(
    `${name.padEnd(34)} p50 ${ms(kiln.p50).padStart(9)}  p99 ${ms(kiln.p99).padStart(9)}  max ${ms(kiln.max).padStart(9)}` +
      (baseline === undefined
        ? ''
        : `   baseline p50 ${ms(baseline.p50)}  p99 ${ms(baseline.p99)}   ratio p99 ${ratio(kiln.p99 / baseline.p99)}`),
  );
}

const kiln = await startKiln({
  KILN_WEBHOOK_RATE_LIMIT: '0',
  KILN_TRIGGER_WORK_INTERVAL_MS: '1000',
});
try {
  const trigger = await request(
    kiln.baseUrl,
    kiln.headers,
    'POST',
    `/projects/${kiln.projectId}/triggers`,
    {
      name: 'bench',
      provider: 'github',
      branches: ['main'],
      start: false,
    },
  );
  const hook = `${kiln.baseUrl}/api/v1/hooks/${trigger.id}`;
  const deliver = (payload) => () => {
    const { body, headers } = delivery(trigger.secret, payload);
    return { url: hook, init: { method: 'POST', headers, body } };
  };
  let branch = 0;
  const createBuild = () => ({
    url: `${kiln.baseUrl}/api/v1/builds`,
    init: {
      method: 'POST',
      headers: { ...kiln.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        project_id: kiln.projectId,
        git_branch: `bench-${branch++}`,
        git_commit: sha(),
      }),
    },
  });
  /** Until every delivery so far has its build (or its outcome). */
  const drained = async () => {
    for (;;) {
      const [{ pending }] = await kiln.dataSource.query(
        "SELECT count(*)::int AS pending FROM trigger_deliveries WHERE outcome = 'pending'",
      );
      if (pending === 0) return;
      await delay(50);
    }
  };

  // Warm both paths up.
  await sequential(50, () => deliver(pushPayload(sha()))());
  await sequential(50, createBuild);

  console.log(
    `webhooks: ${DELIVERIES} signed GitHub pushes per section; goal: p99 answer under ${GOAL_MS} ms`,
  );
  const oneHook = await sequential(DELIVERIES, () => deliver(pushPayload(sha()))());
  const oneCreate = await sequential(DELIVERIES, createBuild);
  line('one at a time', oneHook, oneCreate);
  const manyHook = await concurrent(DELIVERIES, CONCURRENCY, () => deliver(pushPayload(sha()))());
  const manyCreate = await concurrent(DELIVERIES, CONCURRENCY, createBuild);
  line(`${CONCURRENCY} at a time`, manyHook, manyCreate);

  // Until the build exists: the delivery's outcome turns from pending to built, each delivery
  // alone (after the sections above have been built).
  await drained();
  const untilBuilt = [];
  for (let i = 0; i < 50; i++) {
    const begin = nowMs();
    const { url, init } = deliver(pushPayload(sha()))();
    const answer = await (await fetch(url, init)).json();
    for (;;) {
      const { deliveries } = await request(
        kiln.baseUrl,
        kiln.headers,
        'GET',
        `/triggers/${trigger.id}/deliveries`,
      );
      const mine = deliveries.find((d) => d.id === answer.delivery.id);
      if (mine !== undefined && mine.outcome !== 'pending') break;
      await delay(2);
    }
    untilBuilt.push(nowMs() - begin);
  }
  line('delivery to build created', latencySummary(untilBuilt));

  // One of the largest payloads GitHub sends: signed, verified, parsed and recorded whole.
  const commitBytes = Buffer.byteLength(JSON.stringify(commitWithFiles(2000)));
  const commits = Array.from(
    { length: Math.floor((LARGEST_BYTES - 100_000) / (commitBytes + 1)) },
    () => commitWithFiles(2000),
  );
  const big = await sequential(5, () => deliver(pushPayload(sha(), commits))());
  const size = Buffer.byteLength(JSON.stringify(pushPayload(sha(), commits)));
  line(`${(size / 1024 / 1024).toFixed(1)} MiB delivery`, big);

  const worst = Math.max(oneHook.p99, manyHook.p99, big.p99);
  console.log(
    `goal (every delivery answered within ${GOAL_MS} ms, p99): ${ms(worst)}: ${verdict(worst < GOAL_MS)}`,
  );
} finally {
  await kiln.close();
}
