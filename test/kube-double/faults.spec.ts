import { get } from 'node:http';
import { PassThrough } from 'node:stream';
import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, expectStatus, k8s, kubeConfigFor } from '../support/kube/client.js';

const NS = 'faults';
const BUILDER = 'registry.example/kaniko@sha256:4444';
const CM_PATH = `/api/v1/namespaces/${NS}/configmaps`;

describe(`${KubeApiServer.name} fault injection`, () => {
  let server: KubeApiServer;
  let config: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let batch: k8s.BatchV1Api;

  beforeEach(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS] });
    config = kubeConfigFor(server.url, NS);
    core = config.makeApiClient(k8s.CoreV1Api);
    batch = config.makeApiClient(k8s.BatchV1Api);
  });

  afterEach(async () => {
    await server.stop();
  });

  const configMap = (name: string): Promise<k8s.V1ConfigMap> =>
    core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name } } });

  const runningPod = async (job: string): Promise<string> => {
    await batch.createNamespacedJob({
      namespace: NS,
      body: {
        metadata: { name: job },
        spec: {
          backoffLimit: 0,
          template: {
            spec: { restartPolicy: 'Never', containers: [{ name: 'build', image: BUILDER }] },
          },
        },
      },
    });
    return eventually(async () => {
      const pod = (
        await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job}` })
      ).items[0];
      return pod?.status?.phase === 'Running' ? pod.metadata?.name : undefined;
    });
  };

  it('answers 410 Gone to the next watch, and a client-node informer relists', async () => {
    await configMap('before');
    const informer = k8s.makeInformer(config, CM_PATH, () =>
      core.listNamespacedConfigMap({ namespace: NS }),
    );
    const seen: string[] = [];
    informer.on('add', (o) => seen.push(o.metadata?.name ?? ''));
    informer.on('error', () => undefined);
    const lists = (): number =>
      server.requests.filter((r) => r.path === CM_PATH && r.query.watch === undefined).length;
    await informer.start();
    await eventually(() => (server.openWatches === 1 ? true : undefined));
    const listed = lists();
    server.goneNextWatch({ path: CM_PATH });
    server.closeWatches();
    await eventually(() => (lists() > listed ? true : undefined));
    await configMap('after');
    await eventually(() => (seen.includes('after') ? true : undefined));
    expect(seen).toEqual(['before', 'after']);
    await informer.stop();
  });

  it('answers HTTP 410 to a watch when asked to, which ends client-node Watch with Gone', async () => {
    server.goneNextWatch({ asEvent: false });
    const done = new Promise<unknown>((resolve) => {
      void new k8s.Watch(config).watch(CM_PATH, {}, () => undefined, resolve);
    });
    expect(await done).toMatchObject({ statusCode: 410 });
  });

  it('answers 500 to the next N matching requests, then succeeds', async () => {
    await configMap('cm');
    server.failNext(`${CM_PATH}/cm`, 500, { count: 2, method: 'GET' });
    await core.patchNamespacedConfigMap({
      namespace: NS,
      name: 'cm',
      body: [{ op: 'add', path: '/data', value: { a: 'b' } }],
    }); // a PATCH does not match the GET-only fault
    for (let i = 0; i < 2; i++)
      expect(
        await expectStatus(core.readNamespacedConfigMap({ namespace: NS, name: 'cm' })),
      ).toMatchObject({
        code: 500,
        reason: 'InternalError',
      });
    expect((await core.readNamespacedConfigMap({ namespace: NS, name: 'cm' })).data).toEqual({
      a: 'b',
    });
  });

  it('answers 429 with Retry-After', async () => {
    server.failNext(/\/configmaps$/, 429, { retryAfterSeconds: 3 });
    const response = await fetch(`${server.url}${CM_PATH}`);
    expect(response.status).toBe(429);
    expect(response.headers.get('retry-after')).toBe('3');
    expect(await response.json()).toMatchObject({
      reason: 'TooManyRequests',
      details: { retryAfterSeconds: 3 },
    });
    expect((await fetch(`${server.url}${CM_PATH}`)).status).toBe(200);
  });

  it('delays matching responses by the given time, only as many as asked', async () => {
    const undo = server.delayRequests(3_000, { path: CM_PATH, count: 1 });
    const answered: string[] = [];
    const started = Date.now();
    const first = core.listNamespacedConfigMap({ namespace: NS }).then(() => {
      answered.push('first');
      return Date.now() - started;
    });
    // The second is sent once the first is held: the one delay is the first's.
    await server.untilHeld(1);
    await core.listNamespacedConfigMap({ namespace: NS });
    answered.push('second');

    expect(server.heldRequests).toBe(1);
    expect(await first).toBeGreaterThanOrEqual(2_990);
    expect(answered).toEqual(['second', 'first']);
    undo();
  });

  it('is unreachable for a period (refused connections, watches cut), then serves on the same port', async () => {
    await configMap('kept');
    const ended = new Promise<unknown>((resolve) => {
      void new k8s.Watch(config).watch(CM_PATH, {}, () => undefined, resolve);
    });
    await eventually(() => (server.openWatches === 1 ? true : undefined));
    const url = server.url;
    await server.goOffline();
    await ended;
    await expect(fetch(`${url}${CM_PATH}`)).rejects.toThrow();
    const back = server.unreachableFor(0); // already offline: comes back at once
    await back;
    expect(server.url).toBe(url);
    expect(
      (await core.readNamespacedConfigMap({ namespace: NS, name: 'kept' })).metadata?.name,
    ).toBe('kept');
  });

  it('keeps the cluster running while unreachable: a Job finishes during the outage', async () => {
    server.kubelet.script(BUILDER, { runMs: 300 });
    await runningPod('outage');
    await server.goOffline();
    await new Promise((resolve) => setTimeout(resolve, 500));
    await server.goOnline();
    const job = await batch.readNamespacedJob({ namespace: NS, name: 'outage' });
    expect(job.status?.conditions?.map((c) => c.type)).toContain('Complete');
  });

  it('cuts a followed log stream after half a line', async () => {
    server.kubelet.script(BUILDER, { lines: 100_000, linesPerSecond: 200 });
    const pod = await runningPod('cut');
    // Raw HTTP: client-node's Log re-emits the socket error where a test cannot catch it.
    let text = '';
    const closed = new Promise<void>((resolve) => {
      const req = get(
        `${server.url}/api/v1/namespaces/${NS}/pods/${pod}/log?follow=true`,
        (res) => {
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('error', () => resolve());
          res.on('close', resolve);
        },
      );
      req.on('error', () => resolve());
    });
    await eventually(() => (text.split('\n').length > 3 ? true : undefined));
    expect(server.cutLogStreams({ pod })).toBe(1);
    await closed;
    expect(text.endsWith('\n')).toBe(false);
    const partial = text.split('\n').at(-1) ?? '';
    expect(partial.length).toBeGreaterThan(0);
    expect('line 000010 of 100000'.length).toBeGreaterThan(partial.length);
    expect(server.openLogStreams({ pod })).toBe(0);
  });

  it('stalls a followed log stream: no more bytes while the container runs, and the end loses lines', async () => {
    server.kubelet.script(BUILDER, { lines: 60, linesPerSecond: 200 });
    const pod = await runningPod('stall');
    const stream = new PassThrough();
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const ended = new Promise<void>((resolve) => stream.on('end', resolve));
    await new k8s.Log(config).log(NS, pod, 'build', stream, { follow: true });
    await eventually(() => (text.split('\n').length > 3 ? true : undefined));
    expect(server.stallLogStreams({ pod })).toBe(1);
    // Bytes already on their way when the stall began may still land: wait until none arrive
    // for a while, then nothing more may come until the stream ends.
    let atStall = text;
    for (let quiet = 0; quiet < 3;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      quiet = text === atStall ? quiet + 1 : 0;
      atStall = text;
    }
    expect(atStall.trimEnd().split('\n').length).toBeLessThan(60);
    await ended;
    expect(text).toBe(atStall);
    const full = await core.readNamespacedPodLog({ namespace: NS, name: pod });
    expect(full.trimEnd().split('\n')).toHaveLength(60);
    expect(full.startsWith(atStall)).toBe(true);
  });

  /** A watch over raw HTTP (client-node's Watch ends a quiet one after 30 s): what arrived. */
  const rawWatch = (
    path: string,
    query = '',
  ): { seen: { status?: number; text: string; ended: boolean }; close: () => void } => {
    const seen: { status?: number; text: string; ended: boolean } = { text: '', ended: false };
    const req = get(`${server.url}${path}?watch=true${query}`, (res) => {
      seen.status = res.statusCode;
      res.on('data', (chunk: Buffer) => (seen.text += chunk.toString()));
      res.on('end', () => (seen.ended = true));
      res.on('error', () => undefined);
    });
    req.on('error', () => undefined);
    return { seen, close: () => req.destroy() };
  };
  const added = (text: string): string[] =>
    text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { type: string; object: k8s.KubernetesObject })
      .filter((event) => event.type === 'ADDED')
      .map((event) => event.object.metadata?.name ?? '');

  it('blackholes the watches of a path: open ones go silent for good, new ones get no answer until the heal', async () => {
    const open = rawWatch(CM_PATH, '&timeoutSeconds=1');
    const other = rawWatch(`/api/v1/namespaces/${NS}/secrets`);
    await eventually(() => (server.openWatches === 2 ? true : undefined));
    await configMap('before');
    await eventually(() => (added(open.seen.text).includes('before') ? true : undefined));

    const { silenced, heal } = server.blackholeWatches({ path: CM_PATH });
    const held = rawWatch(CM_PATH);
    await configMap('during');
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'during' } } });
    await eventually(() => (added(other.seen.text).includes('during') ? true : undefined));
    // Past the silenced watch's timeoutSeconds: its end is swallowed too.
    await new Promise((resolve) => setTimeout(resolve, 1_500));

    expect(silenced).toBe(1);
    expect(added(open.seen.text)).toEqual(['before']);
    expect(open.seen.ended).toBe(false);
    expect(held.seen.status).toBeUndefined();
    expect(server.openWatches).toBe(2);

    heal();
    await configMap('after');
    await eventually(() => (added(held.seen.text).includes('after') ? true : undefined));
    expect(held.seen.status).toBe(200);
    expect(added(held.seen.text)).toEqual(['before', 'during', 'after']);
    expect(added(open.seen.text)).toEqual(['before']);
    expect(open.seen.ended).toBe(false);
    for (const watch of [open, other, held]) watch.close();
  });
});
