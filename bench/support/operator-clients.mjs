// The client side of bench/operator.bench.mjs, in its own process (as CI systems calling kiln, or
// another controller creating Jobs, would be): kiln's REST API, and the baseline that creates Jobs
// straight through @kubernetes/client-node. Times are CLOCK_MONOTONIC ms (process.hrtime), the
// clock every process on the machine shares, so the bench compares them with its own.
// eslint-disable-next-line no-restricted-imports -- the baseline is client-node itself, unwrapped
import * as k8s from '@kubernetes/client-node';
import { openFrameStream } from './frame-reader.mjs';
import { nowMs } from './stats.mjs';
import { answerCommands } from './commands.mjs';

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

const wallMs = () => performance.timeOrigin + performance.now();
const TS = Buffer.from('"timestamp":"');

/**
 * Latencies (ms) in 1 ms buckets up to 60 s, the last bucket holding everything slower: the
 * streams of 100 watchers at 20,000 lines/s are too many samples to keep one by one.
 */
class Histogram {
  constructor() {
    this.counts = new Uint32Array(60_001);
    this.n = 0;
    this.max = 0;
  }
  add(ms) {
    const at = Math.min(60_000, Math.max(0, Math.floor(ms)));
    this.counts[at]++;
    this.n++;
    if (ms > this.max) this.max = ms;
  }
  percentile(p) {
    if (this.n === 0) return NaN;
    const rank = Math.ceil((p / 100) * this.n);
    let seen = 0;
    for (let at = 0; at < this.counts.length; at++) {
      seen += this.counts[at];
      if (seen >= rank) return at + 0.5;
    }
    return this.max;
  }
  summary() {
    return { count: this.n, p50: this.percentile(50), p99: this.percentile(99), max: this.max };
  }
}

/**
 * Lines received: their latency (receipt − the kubelet's timestamp) once the window opened,
 * and per build and timestamp the sum and count of receipt times (the delivered stage's mean).
 */
class Arrivals {
  constructor() {
    this.window = [Infinity, Infinity];
    this.latency = new Histogram();
    this.byBuild = new Map();
    this.lines = 0;
  }
  add(build, key, at) {
    this.lines++;
    if (key < this.window[0] || key > this.window[1]) return;
    this.latency.add(at - key);
    let keys = this.byBuild.get(build);
    if (keys === undefined) this.byBuild.set(build, (keys = new Map()));
    const sum = keys.get(key);
    if (sum === undefined) keys.set(key, [at, 1]);
    else {
      sum[0] += at;
      sum[1]++;
    }
  }
}

/** The kubelet timestamp (ms) of a stream message: its `"timestamp":"…"` field. */
function tsOf(buffer, start, end) {
  const at = buffer.indexOf(TS, start);
  if (at < 0 || at + TS.length + 24 > end) return NaN;
  return Date.parse(buffer.toString('latin1', at + TS.length, at + TS.length + 24));
}

let watchers;
let raw;

const commands = {
  /**
   * Opens `perBuild` live log streams (the minimal frame reader) on each build; resolves once all
   * are open. `watchWindow` sets which kubelet timestamps count, `watchResults` answers.
   */
  async watchLogs({ baseUrl, headers, buildIds, perBuild }) {
    watchers = { arrivals: new Arrivals(), sockets: [] };
    const { arrivals } = watchers;
    const url = (id) => `${baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`;
    for (const id of buildIds) {
      for (let i = 0; i < perBuild; i++) {
        watchers.sockets.push(
          openFrameStream(url(id), headers, (buffer, start, end) => {
            const key = tsOf(buffer, start, end);
            if (!Number.isNaN(key)) arrivals.add(id, key, wallMs());
          }),
        );
      }
    }
    await Promise.all(watchers.sockets.map((s) => s.opened));
    return watchers.sockets.length;
  },

  /**
   * The baseline of the way a line travels: the same pods' builder logs read straight from the
   * double (follow, timestamps), no kiln between; the same latency, receipt − timestamp.
   */
  async rawFollow({ server, namespace, pods }) {
    raw = { arrivals: new Arrivals(), aborts: [] };
    const { arrivals } = raw;
    for (const pod of pods) {
      const abort = new AbortController();
      raw.aborts.push(abort);
      const url = `${server}/api/v1/namespaces/${namespace}/pods/${pod}/log?container=build&follow=true&timestamps=true`;
      void (async () => {
        const response = await fetch(url, { signal: abort.signal });
        const decoder = new TextDecoder();
        let partial = '';
        for await (const chunk of response.body) {
          const at = wallMs();
          const parts = (partial + decoder.decode(chunk, { stream: true })).split('\n');
          partial = parts.pop() ?? '';
          for (const line of parts) {
            const key = Date.parse(`${line.slice(0, 23)}Z`);
            if (!Number.isNaN(key)) arrivals.add(pod, key, at);
          }
        }
      })().catch(() => undefined);
    }
    return pods.length;
  },

  /** Which kubelet timestamps (wall ms) count from now on, for the watchers and the baseline. */
  watchWindow({ fromMs, toMs }) {
    for (const arrivals of [watchers?.arrivals, raw?.arrivals])
      if (arrivals !== undefined) arrivals.window = [fromMs, toMs];
    return true;
  },

  /** What the watchers and the baseline received; closes them. */
  watchResults() {
    const result = (arrivals) =>
      arrivals === undefined
        ? undefined
        : {
            lines: arrivals.lines,
            latency: arrivals.latency.summary(),
            delivered: Object.fromEntries(
              [...arrivals.byBuild].map(([id, keys]) => [
                id,
                [...keys].map(([key, [sum, n]]) => [key, sum / n, n]),
              ]),
            ),
          };
    const answer = { watchers: result(watchers?.arrivals), raw: result(raw?.arrivals) };
    for (const socket of watchers?.sockets ?? []) socket.terminate();
    for (const abort of raw?.aborts ?? []) abort.abort();
    watchers = undefined;
    raw = undefined;
    return answer;
  },

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

answerCommands(commands);
