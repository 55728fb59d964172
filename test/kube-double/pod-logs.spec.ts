import { PassThrough } from 'node:stream';
import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, expectStatus, k8s, kubeConfigFor } from '../support/kube/client.js';
import { numberedLine, verifyCrc } from '../support/kube/kubelet.js';

const NS = 'logs';
const BUILDER = 'registry.example/kaniko@sha256:3333';
const TS = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)$/;

/** Follows a log with client-node's Log; `ended` resolves when the server ends the response. */
async function follow(
  config: k8s.KubeConfig,
  pod: string,
  container: string,
  options: k8s.LogOptions,
): Promise<{ text: () => string; ended: Promise<void>; controller: AbortController }> {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const ended = new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
  });
  const controller = await new k8s.Log(config).log(NS, pod, container, stream, options);
  return { text: () => text, ended, controller };
}

describe(`${KubeApiServer.name} pods/log`, () => {
  let server: KubeApiServer;
  let config: k8s.KubeConfig;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;

  beforeEach(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS] });
    config = kubeConfigFor(server.url, NS);
    batch = config.makeApiClient(k8s.BatchV1Api);
    core = config.makeApiClient(k8s.CoreV1Api);
  });

  afterEach(async () => {
    await server.stop();
  });

  /**
   * Starts a Job running BUILDER and resolves with its pod's name once the builder has started:
   * running, or already finished (a short script can end between two polls).
   */
  const runJob = async (name: string, containers = ['build']): Promise<string> => {
    await batch.createNamespacedJob({
      namespace: NS,
      body: {
        metadata: { name },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: containers.map((c) => ({ name: c, image: BUILDER })),
            },
          },
        },
      },
    });
    return eventually(async () => {
      const pod = (
        await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${name}` })
      ).items[0];
      const phase = pod?.status?.phase;
      return phase === 'Running' || phase === 'Succeeded' || phase === 'Failed'
        ? pod?.metadata?.name
        : undefined;
    });
  };

  it('streams every line in order with nanosecond timestamps and ends when the container terminates', async () => {
    const n = 3000;
    server.kubelet.script(BUILDER, { lines: n, linesPerSecond: 20_000, printCrc: true });
    const pod = await runJob('follow');
    const log = await follow(config, pod, 'build', { follow: true, timestamps: true });
    await log.ended;
    const lines = log.text().trimEnd().split('\n');
    expect(lines).toHaveLength(n + 1);
    const parsed = lines.map((l) => TS.exec(l));
    expect(parsed.every((m) => m !== null)).toBe(true);
    const texts = parsed.map((m) => m?.[2] ?? '');
    expect(texts.slice(0, n)).toEqual(Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)));
    expect(verifyCrc(texts)).toBe(true);
    const stamps = parsed.map((m) => m?.[1] ?? '');
    expect([...stamps].sort()).toEqual(stamps);
    const status = (await core.readNamespacedPod({ namespace: NS, name: pod })).status;
    expect(status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
  });

  it('re-sends the lines of the same second for a sinceTime, as the kubelet truncates it', async () => {
    await core.createNamespacedPod({
      namespace: NS,
      body: { metadata: { name: 'bare' }, spec: { containers: [{ name: 'c', image: 'x' }] } },
    });
    server.appendPodLog(NS, 'bare', 'c', ['a'], new Date('2026-01-01T00:00:04.900Z'));
    server.appendPodLog(NS, 'bare', 'c', ['b'], new Date('2026-01-01T00:00:05.100Z'));
    server.appendPodLog(NS, 'bare', 'c', ['c1', 'c2'], new Date('2026-01-01T00:00:05.700Z'));
    server.appendPodLog(NS, 'bare', 'c', ['d'], new Date('2026-01-01T00:00:06.000Z'));
    const read = async (sinceTime: string): Promise<string> => {
      const log = await follow(config, 'bare', 'c', { sinceTime, timestamps: true });
      await log.ended;
      return log.text();
    };
    const fromC = await read('2026-01-01T00:00:05.700000000Z');
    expect(fromC).toBe(
      [
        '2026-01-01T00:00:05.100000000Z b',
        '2026-01-01T00:00:05.700000000Z c1',
        '2026-01-01T00:00:05.700000000Z c2',
        '2026-01-01T00:00:06.000000000Z d',
        '',
      ].join('\n'),
    );
    // LOG-04's assumption: the same sinceTime gives the same lines in the same order.
    expect(await read('2026-01-01T00:00:05.700000000Z')).toBe(fromC);
    expect(await read('2026-01-01T00:00:07Z')).toBe('');
  });

  it('gives lines of one write one shared timestamp, in the order they were written', async () => {
    server.kubelet.script(BUILDER, { lines: 40, linesPerWrite: 10, linesPerSecond: 20_000 });
    const pod = await runJob('same-ts');
    const log = await follow(config, pod, 'build', { follow: true, timestamps: true });
    await log.ended;
    const parsed = log
      .text()
      .trimEnd()
      .split('\n')
      .map((l) => TS.exec(l));
    const stamps = new Set(parsed.map((m) => m?.[1]));
    expect(stamps.size).toBe(4);
    expect(parsed.map((m) => m?.[2])).toEqual(
      Array.from({ length: 40 }, (_, i) => numberedLine(i + 1, 40)),
    );
  });

  it('honours tailLines, limitBytes and sinceSeconds on a finished container', async () => {
    server.kubelet.script(BUILDER, { lines: ['one', 'two', 'three'], runMs: 200 });
    const pod = await runJob('options');
    await eventually(async () =>
      (await core.readNamespacedPod({ namespace: NS, name: pod })).status?.phase === 'Succeeded'
        ? true
        : undefined,
    );
    expect(await core.readNamespacedPodLog({ namespace: NS, name: pod, tailLines: 2 })).toBe(
      'two\nthree\n',
    );
    expect(await core.readNamespacedPodLog({ namespace: NS, name: pod, limitBytes: 6 })).toBe(
      'one\ntw',
    );
    expect(await core.readNamespacedPodLog({ namespace: NS, name: pod, sinceSeconds: 60 })).toBe(
      'one\ntwo\nthree\n',
    );
  });

  /** Runs BUILDER in a Job and resolves with its pod's name once the pod has Succeeded. */
  const runToEnd = async (name: string): Promise<string> => {
    const pod = await runJob(name);
    await eventually(async () =>
      (await core.readNamespacedPod({ namespace: NS, name: pod })).status?.phase === 'Succeeded'
        ? true
        : undefined,
    );
    return pod;
  };

  /** A whole `timestamps=true` log as [timestamp, text] pairs, each line required to have both. */
  const stamped = async (pod: string, options: k8s.LogOptions = {}): Promise<string[][]> => {
    const log = await follow(config, pod, 'build', { ...options, timestamps: true });
    await log.ended;
    const text = log.text();
    if (text === '') return [];
    expect(text.endsWith('\n')).toBe(true);
    return text
      .slice(0, -1)
      .split('\n')
      .map((line) => {
        const match = TS.exec(line);
        expect(match).not.toBeNull();
        return [match?.[1] ?? '', match?.[2] ?? ''];
      });
  };

  it('serves a lines entry holding newlines as one timestamped line per line, in order', async () => {
    server.kubelet.script(BUILDER, { lines: ['one', 'two\nthree\nfour', 'five\n', '\nsix'] });
    const pod = await runToEnd('multi-line');
    const lines = await stamped(pod);
    expect(lines.map(([, text]) => text)).toEqual([
      'one',
      'two',
      'three',
      'four',
      'five',
      '',
      '',
      'six',
    ]);
    const stamps = lines.map(([stamp]) => stamp);
    expect([...stamps].sort()).toEqual(stamps);
    expect(await core.readNamespacedPodLog({ namespace: NS, name: pod })).toBe(
      'one\ntwo\nthree\nfour\nfive\n\n\nsix\n',
    );
  });

  it('counts each line of a multi-line entry for tailLines', async () => {
    server.kubelet.script(BUILDER, { lines: ['one', 'two\nthree\nfour'] });
    const pod = await runToEnd('multi-tail');
    expect(await core.readNamespacedPodLog({ namespace: NS, name: pod, tailLines: 2 })).toBe(
      'three\nfour\n',
    );
  });

  it('spends limitBytes on the timestamp of every line of a multi-line entry', async () => {
    server.kubelet.script(BUILDER, { lines: ['one', 'two\nthree'] });
    const pod = await runToEnd('multi-limit');
    const stamp = '2026-01-01T00:00:00.000000000Z';
    const expected = `${stamp} one\n${stamp} two\n${stamp} `;
    const log = await core.readNamespacedPodLog({
      namespace: NS,
      name: pod,
      timestamps: true,
      limitBytes: expected.length,
    });
    expect(log.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z/g, stamp)).toBe(expected);
  });

  it('starts a sinceTime read inside a multi-line entry, at the second of the line it names', async () => {
    // 30 lines 50 ms apart span more than a second: some line starts a new second.
    const parts = Array.from({ length: 30 }, (_, i) => `part ${i + 1}`);
    server.kubelet.script(BUILDER, { lines: [parts.join('\n')], linesPerSecond: 20 });
    const pod = await runToEnd('multi-since');
    const all = await stamped(pod);
    expect(all.map(([, text]) => text)).toEqual(parts);
    const second = (stamp: string | undefined): string => (stamp ?? '').slice(0, 19);
    const next = all.findIndex(([stamp]) => second(stamp) !== second(all[0]?.[0]));
    expect(next).toBeGreaterThan(0);
    expect(await stamped(pod, { sinceTime: all[next]?.[0] ?? '' })).toEqual(all.slice(next));
  });

  it('requires a container for a pod with several, refuses previous, and answers 404 for a deleted pod', async () => {
    server.kubelet.script(BUILDER, { hang: true });
    const pod = await runJob('multi', ['build', 'sidecar']);
    expect(
      await expectStatus(core.readNamespacedPodLog({ namespace: NS, name: pod })),
    ).toMatchObject({
      code: 400,
      message: `a container name must be specified for pod ${pod}, choose one of: [build sidecar]`,
    });
    expect(
      await expectStatus(
        core.readNamespacedPodLog({ namespace: NS, name: pod, container: 'build', previous: true }),
      ),
    ).toMatchObject({
      code: 400,
      message: `previous terminated container "build" in pod "${pod}" not found`,
    });
    await core.deleteNamespacedPod({ namespace: NS, name: pod, gracePeriodSeconds: 0 });
    expect(
      await expectStatus(
        core.readNamespacedPodLog({ namespace: NS, name: pod, container: 'build' }),
      ),
    ).toMatchObject({ code: 404, reason: 'NotFound', message: `pods "${pod}" not found` });
  });
});
