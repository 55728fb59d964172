// make soak → memory after a day of heavy builds, compressed: SOAK_BUILDS real local builds
// (buildah, two at a time) each printing SOAK_LINES numbered lines while SOAK_SUBSCRIBERS
// WebSocket clients per build follow the log from another process. kiln's RSS is sampled idle
// before (the baseline), during, and idle after; the figure is RSS after ÷ RSS before. The goal is
// reported, never asserted. Run with --expose-gc so "idle" means after a full collection.
import { fork } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startKiln } from './support/kiln.mjs';
import { delay, int, ratio, verdict } from './support/stats.mjs';
import { gitIn, onPath } from './support/system.mjs';

const BUILDS = Number(process.env.SOAK_BUILDS ?? 20);
const LINES = Number(process.env.SOAK_LINES ?? 200_000);
const SUBSCRIBERS = Number(process.env.SOAK_SUBSCRIBERS ?? 5);
const PARALLEL = 2;
const GOAL_RATIO = 1.25;

/** A repository whose Dockerfile prints LINES numbered lines, one branch per build. */
function makeRepository() {
  const dir = mkdtempSync('/dev/shm/kiln-soak-repo-');
  const git = gitIn(dir);
  git('init', '--quiet', '--initial-branch', 'main');
  copyFileSync('/bin/busybox', join(dir, 'busybox'));
  writeFileSync(
    join(dir, 'Dockerfile'),
    [
      'FROM scratch',
      'COPY busybox /bin/busybox',
      'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
      `RUN seq 1 ${LINES}`,
      '',
    ].join('\n'),
  );
  git('add', '.');
  git('commit', '--quiet', '-m', 'soak');
  for (let i = 0; i < BUILDS; i++) git('branch', `soak-${i}`);
  return dir;
}

function subscribers() {
  const child = fork(new URL('./support/soak-subscribers.mjs', import.meta.url));
  const waiting = new Map();
  let next = 0;
  child.on('message', (message) => {
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  });
  return {
    watch(args) {
      const id = next++;
      child.send({ ...args, id });
      return new Promise((done) => waiting.set(id, done));
    },
    close: () => child.kill(),
  };
}

async function idleRss() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await delay(1000);
  }
  return process.memoryUsage();
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

async function main() {
  if (!onPath('buildah') || !onPath('busybox')) {
    console.log(
      'soak: skipped, it needs buildah and busybox-static (make system-deps installs them)',
    );
    return;
  }
  if (globalThis.gc === undefined) console.log('soak: run with --expose-gc for comparable figures');
  const repo = makeRepository();
  const kiln = await startKiln(
    { KILN_LOCAL_MAX_PARALLEL: String(PARALLEL), KILN_LOG_MAX_BYTES_PER_BUILD: String(2 ** 30) },
    { runner: 'configured' },
  );
  const clients = subscribers();
  try {
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      `file://${repo}`,
      kiln.projectId,
    ]);
    const before = await idleRss();
    let peak = before.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 250);
    const started = Date.now();
    const results = [];
    for (let first = 0; first < BUILDS; first += PARALLEL) {
      const wave = [];
      for (let i = first; i < Math.min(BUILDS, first + PARALLEL); i++)
        wave.push(runBuild(kiln, clients, i));
      results.push(...(await Promise.all(wave)));
    }
    clearInterval(sampler);
    const seconds = (Date.now() - started) / 1000;
    const after = await idleRss();

    const complete = results.filter((r) => r.status === 'success' && r.numbered === LINES);
    const fullStreams = results.flatMap((r) => r.streams).filter((s) => s.code === 1000);
    console.log(
      `soak: ${BUILDS} builds × ${int(LINES)} lines, ${SUBSCRIBERS} subscribers each, in ${seconds.toFixed(0)} s`,
    );
    console.log(
      `  builds that succeeded with every numbered line stored once: ${complete.length}/${BUILDS}; ` +
        `streams closed 1000 at the end: ${fullStreams.length}/${BUILDS * SUBSCRIBERS}`,
    );
    for (const r of results.filter((r) => !complete.includes(r)))
      console.log(`  ${r.id}: ${r.status}, ${int(r.numbered)} numbered lines, ${r.error ?? ''}`);
    console.log(
      '| RSS | idle before (baseline) | peak during | idle after | after ÷ before | goal |',
    );
    console.log('| --- | --- | --- | --- | --- | --- |');
    const r = after.rss / before.rss;
    console.log(
      `| kiln | ${mib(before.rss)} | ${mib(peak)} | ${mib(after.rss)} | ${ratio(r)} | ≤ ${GOAL_RATIO}: ${verdict(r <= GOAL_RATIO)} |`,
    );
    console.log(
      `  heap used: ${mib(before.heapUsed)} before, ${mib(after.heapUsed)} after; ` +
        `external + array buffers: ${mib(before.external + before.arrayBuffers)} before, ` +
        `${mib(after.external + after.arrayBuffers)} after`,
    );
  } finally {
    clients.close();
    await kiln.close();
    rmSync(repo, { recursive: true, force: true });
  }
}

async function runBuild(kiln, clients, index) {
  const call = async (method, path, body) => {
    const response = await fetch(`${kiln.baseUrl}/api/v1${path}`, {
      method,
      headers: { ...kiln.headers, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text === '' ? undefined : JSON.parse(text);
  };
  const { id } = await call('POST', '/builds', {
    project_id: kiln.projectId,
    git_branch: `soak-${index}`,
  });
  await call('POST', `/builds/${id}/start`);
  const streams = await clients.watch({
    baseUrl: kiln.baseUrl,
    headers: kiln.headers,
    buildId: id,
    count: SUBSCRIBERS,
  });
  const build = await call('GET', `/builds/${id}`);
  const [{ numbered }] = await kiln.dataSource.query(
    `SELECT count(DISTINCT message)::int AS numbered FROM build_log_lines
      WHERE build_id = $1 AND message ~ '^[0-9]+$'`,
    [id],
  );
  return {
    id,
    status: build.status,
    error: build.error_message,
    numbered,
    streams: streams.streams,
  };
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
