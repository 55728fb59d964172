// node bench/local.bench.mjs → the local runner's layer cache (docs/adr/0055-local-layer-cache.md):
// a Dockerfile of a busybox-static base made here, a COPY of 50 MB of random bytes and four RUN
// steps, built three times through kiln's API with the local runner (real buildah, vfs): first
// with an empty cache (the baseline), then unchanged (goal: ≥ 5× faster than the first), then
// with only the last RUN step changed (goal: only that step runs again; read from the build log).
// Each time is POST /builds/{id}/start → the build reads success. The repository is a plain path on
// this machine (git clones it locally), as a laptop user's checkout would be. Goals are reported,
// never asserted; exit 0.
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { request, startKiln } from './support/kiln.mjs';
import { delay, nowMs, ratio, seconds, verdict } from './support/stats.mjs';
import { gitIn, onPath } from './support/system.mjs';

const BLOB_BYTES = 50 * 2 ** 20;
const GOAL_SPEEDUP = 5;

const dockerfile = (version) =>
  [
    'FROM scratch',
    'COPY busybox /bin/busybox',
    'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
    'COPY blob.bin /data/blob.bin',
    'RUN sha256sum /data/blob.bin > /data/blob.sha256',
    'RUN mkdir -p /app && echo "listen 8080" > /app/config',
    `RUN echo "${version}" > /app/version`,
    '',
  ].join('\n');

/** Branch `main` with the Dockerfile; branch `changed` differs in its last RUN step only. */
function makeRepository() {
  const dir = mkdtempSync('/dev/shm/kiln-local-bench-repo-');
  const git = gitIn(dir);
  git('init', '--quiet', '--initial-branch', 'main');
  copyFileSync('/bin/busybox', join(dir, 'busybox'));
  writeFileSync(join(dir, 'blob.bin'), randomBytes(BLOB_BYTES));
  writeFileSync(join(dir, 'Dockerfile'), dockerfile('v1'));
  git('add', '.');
  git('commit', '--quiet', '-m', 'bench');
  git('branch', 'again');
  git('checkout', '--quiet', '-b', 'changed');
  writeFileSync(join(dir, 'Dockerfile'), dockerfile('v2'));
  git('commit', '--quiet', '-am', 'change the last step');
  return dir;
}

async function timedBuild(kiln, branch) {
  const { id } = await request(kiln.baseUrl, kiln.headers, 'POST', '/builds', {
    project_id: kiln.projectId,
    git_branch: branch,
  });
  const started = nowMs();
  await request(kiln.baseUrl, kiln.headers, 'POST', `/builds/${id}/start`);
  for (;;) {
    const build = await request(kiln.baseUrl, kiln.headers, 'GET', `/builds/${id}`);
    if (build.status === 'success') break;
    if (!['queued', 'in_progress'].includes(build.status)) {
      throw new Error(`build on ${branch} ${build.status}: ${build.error_message}`);
    }
    await delay(50);
  }
  const millis = nowMs() - started;
  const { logs } = await request(
    kiln.baseUrl,
    kiln.headers,
    'GET',
    `/builds/${id}/logs?limit=1000`,
  );
  const messages = logs.map((line) => line.message);
  const steps = messages.filter((m) => /^STEP \d+\/\d+: /.test(m));
  const ran = [];
  let current;
  const cached = new Set();
  for (const m of messages) {
    const step = /^STEP (\d+)\/\d+: /.exec(m);
    if (step) current = step[1];
    else if (m.startsWith('--> Using cache') && current) cached.add(current);
  }
  for (const m of steps) {
    const n = /^STEP (\d+)/.exec(m)[1];
    if (!cached.has(n) && !/: FROM /.test(m))
      ran.push(m.replace(/^STEP (\d+)\/\d+: /, 'STEP $1: '));
  }
  const summary = messages.find((m) => m.startsWith('[kiln] layer cache: ') && / of /.test(m));
  return { millis, steps: steps.length, cached: cached.size, ran, summary };
}

async function main() {
  if (!onPath('buildah') || !onPath('busybox')) {
    console.log(
      'local: skipped, it needs buildah and busybox-static (make system-deps installs them)',
    );
    return;
  }
  const repo = makeRepository();
  const kiln = await startKiln({}, { runner: 'configured' });
  try {
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo,
      kiln.projectId,
    ]);
    const first = await timedBuild(kiln, 'main');
    const second = await timedBuild(kiln, 'again');
    const changed = await timedBuild(kiln, 'changed');

    console.log(
      `local: a busybox base + COPY of ${BLOB_BYTES / 2 ** 20} MB + 4 RUN steps (${first.steps} steps), through the API, buildah vfs`,
    );
    console.log('| local layer cache | kiln | baseline | ratio | goal |');
    console.log('| --- | --- | --- | --- | --- |');
    const speedup = first.millis / second.millis;
    console.log(
      `| second build, unchanged Dockerfile | ${seconds(second.millis)} (${second.cached} of ${second.steps} steps from the cache) | first build, empty cache: ${seconds(first.millis)} | ${ratio(speedup)}× faster | ≥ ${GOAL_SPEEDUP}×: ${verdict(speedup >= GOAL_SPEEDUP)} |`,
    );
    const onlyLast =
      changed.ran.length === 1 && changed.ran[0].startsWith(`STEP ${changed.steps}:`);
    console.log(
      `| last RUN step changed | ${seconds(changed.millis)}; ${changed.cached} of ${changed.steps} steps from the cache, ran: ${changed.ran.join('; ')} | first build: ${seconds(first.millis)} | ${ratio(first.millis / changed.millis)}× faster | only the last step runs: ${verdict(onlyLast)} |`,
    );
    console.log(`  build logs said: "${second.summary}"; then "${changed.summary}"`);
  } finally {
    await kiln.close();
    rmSync(repo, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
