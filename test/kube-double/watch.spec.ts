import { PassThrough } from 'node:stream';
import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, FIXTURES_DIR, k8s, kubeConfigFor, merge } from '../support/kube/client.js';

const NS = 'builds';
const B = { group: 'kiln.dev', version: 'v1alpha1', namespace: NS, plural: 'builds' };
const PATH = `/apis/kiln.dev/v1alpha1/namespaces/${NS}/builds`;
const build = (name: string, labels: Record<string, string> = {}): Record<string, unknown> => ({
  apiVersion: 'kiln.dev/v1alpha1',
  kind: 'Build',
  metadata: { name, labels },
  spec: { tenantId: 't', projectId: 'p', method: 'kaniko' },
});

interface Seen {
  type: string;
  name?: string;
  rv?: string;
  code?: number;
}

/** Starts a client-node Watch and records what it gets; `done` resolves with its end reason. */
async function watch(config: k8s.KubeConfig, query: Record<string, string | number | boolean>) {
  const events: Seen[] = [];
  let resolveDone: (err: unknown) => void = () => undefined;
  const done = new Promise<unknown>((resolve) => (resolveDone = resolve));
  const controller = await new k8s.Watch(config).watch(
    PATH,
    query,
    (type, object: { metadata?: { name?: string; resourceVersion?: string }; code?: number }) =>
      events.push({
        type,
        name: object.metadata?.name,
        rv: object.metadata?.resourceVersion,
        ...(object.code ? { code: object.code } : {}),
      }),
    (err) => resolveDone(err),
  );
  return { events, done, controller };
}

describe(`${KubeApiServer.name} watch`, () => {
  let server: KubeApiServer;
  let config: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;

  beforeEach(async () => {
    server = await KubeApiServer.start({
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', NS],
      bookmarkIntervalMs: 200,
    });
    config = kubeConfigFor(server.url, NS);
    custom = config.makeApiClient(k8s.CustomObjectsApi);
  });

  afterEach(async () => {
    await server.stop();
  });

  it('streams ADDED, MODIFIED and DELETED after the given resourceVersion, in order', async () => {
    await custom.createNamespacedCustomObject({ ...B, body: build('before') });
    const list = await custom.listNamespacedCustomObject(B);
    const w = await watch(config, { resourceVersion: list.metadata.resourceVersion });
    await custom.createNamespacedCustomObject({ ...B, body: build('w1') });
    await custom.patchNamespacedCustomObject(
      { ...B, name: 'w1', body: { spec: { suspend: true } } },
      merge,
    );
    await custom.deleteNamespacedCustomObject({ ...B, name: 'w1' });
    await eventually(() => (w.events.length >= 3 ? true : undefined));
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual([
      'ADDED w1',
      'MODIFIED w1',
      'DELETED w1',
    ]);
    const rvs = w.events.map((e) => Number(e.rv));
    expect(rvs).toEqual([...rvs].sort((a, b) => a - b));
    w.controller.abort();
  });

  it('replays the changes a watch missed since an older resourceVersion', async () => {
    const list = await custom.listNamespacedCustomObject(B);
    await custom.createNamespacedCustomObject({ ...B, body: build('missed') });
    const w = await watch(config, { resourceVersion: list.metadata.resourceVersion });
    await eventually(() => (w.events.length >= 1 ? true : undefined));
    expect(w.events).toEqual([expect.objectContaining({ type: 'ADDED', name: 'missed' })]);
    w.controller.abort();
  });

  it('turns a label change out of the selector into DELETED for a selecting watch', async () => {
    await custom.createNamespacedCustomObject({ ...B, body: build('sel', { app: 'kiln' }) });
    const w = await watch(config, { labelSelector: 'app=kiln' });
    await custom.patchNamespacedCustomObject(
      { ...B, name: 'sel', body: { metadata: { labels: { app: 'other' } } } },
      merge,
    );
    await eventually(() => (w.events.length >= 2 ? true : undefined));
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED sel', 'DELETED sel']);
    w.controller.abort();
  });

  it('answers a resourceVersion older than the window with an in-stream 410 ERROR event', async () => {
    const list = await custom.listNamespacedCustomObject(B);
    await custom.createNamespacedCustomObject({ ...B, body: build('after') });
    server.compact();
    const w = await watch(config, { resourceVersion: list.metadata.resourceVersion });
    await expect(w.done).resolves.toBeNull();
    expect(w.events).toEqual([{ type: 'ERROR', code: 410, name: undefined, rv: undefined }]);
  });

  it('sends BOOKMARKs carrying the current resourceVersion when asked to', async () => {
    const w = await watch(config, { allowWatchBookmarks: true, resourceVersion: '1' });
    await custom.createNamespacedCustomObject({ ...B, body: build('bm') });
    await eventually(() => (w.events.some((e) => e.type === 'BOOKMARK') ? true : undefined));
    const bookmark = w.events.find((e) => e.type === 'BOOKMARK');
    expect(Number(bookmark?.rv)).toBe(Number(w.events.find((e) => e.name === 'bm')?.rv));
    w.controller.abort();
  });

  it('serves a streaming list (sendInitialEvents): the state as ADDED, a BOOKMARK marking its end, then changes', async () => {
    await custom.createNamespacedCustomObject({ ...B, body: build('one') });
    await custom.createNamespacedCustomObject({ ...B, body: build('two') });
    const response = await fetch(
      `${server.url}${PATH}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
    );
    const reader = response.body!.getReader();
    let text = '';
    const lines = async (n: number): Promise<Array<Record<string, any>>> => {
      while (text.split('\n').length <= n)
        text += new TextDecoder().decode((await reader.read()).value);
      return text
        .split('\n')
        .slice(0, n)
        .map((line) => JSON.parse(line) as Record<string, any>);
    };
    const initial = await lines(3);
    expect(initial.map((e) => [e['type'], e['object'].metadata.name])).toEqual([
      ['ADDED', 'one'],
      ['ADDED', 'two'],
      ['BOOKMARK', undefined],
    ]);
    expect(initial[2]!['object'].metadata.annotations).toEqual({
      'k8s.io/initial-events-end': 'true',
    });
    await custom.createNamespacedCustomObject({ ...B, body: build('three') });
    const [, , , later] = await lines(4);
    expect([later!['type'], later!['object'].metadata.name]).toEqual(['ADDED', 'three']);
    await reader.cancel();
  });

  it('refuses a streaming list without resourceVersionMatch=NotOlderThan and bookmarks, in the stream', async () => {
    const response = await fetch(`${server.url}${PATH}?watch=true&sendInitialEvents=true`);
    const [event] = (await response.text()).trim().split('\n');
    expect(JSON.parse(event!)).toMatchObject({
      type: 'ERROR',
      object: { kind: 'Status', code: 422, reason: 'Invalid' },
    });
  });

  it('sends no BOOKMARK without allowWatchBookmarks', async () => {
    const w = await watch(config, { resourceVersion: '1' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(w.events.filter((e) => e.type === 'BOOKMARK')).toEqual([]);
    w.controller.abort();
  });

  it('ends the stream after timeoutSeconds', async () => {
    const started = Date.now();
    const w = await watch(config, { timeoutSeconds: 1 });
    await expect(w.done).resolves.toBeNull();
    // Not before its time; that it ends at all, the test's own timeout shows.
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(server.openWatches).toBe(0);
  });

  it('ends every open watch on closeWatches()', async () => {
    const w = await watch(config, {});
    expect(server.openWatches).toBe(1);
    server.closeWatches();
    await expect(w.done).resolves.toBeNull();
  });

  it('follows a pod log until the pod terminates', async () => {
    const core = config.makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedPod({
      namespace: NS,
      body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
    server.appendPodLog(NS, 'p', 'c', ['first']);
    const stream = new PassThrough();
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const ended = new Promise((resolve) => stream.on('end', resolve));
    await new k8s.Log(config).log(NS, 'p', 'c', stream, { follow: true });
    await eventually(() => (text === 'first\n' ? true : undefined));
    server.appendPodLog(NS, 'p', 'c', ['second']);
    await eventually(() => (text === 'first\nsecond\n' ? true : undefined));
    await custom.listNamespacedCustomObject(B); // unrelated traffic does not end the stream
    await core.patchNamespacedPodStatus(
      { namespace: NS, name: 'p', body: { status: { phase: 'Succeeded' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await ended;
    expect(text).toBe('first\nsecond\n');
  });

  describe('with the client-node informer', () => {
    it('lists, then watches from the list resourceVersion, and relists after a 410', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('i1') });
      const informer = k8s.makeInformer(
        config,
        PATH,
        () => custom.listNamespacedCustomObject(B) as never,
      );
      const added: string[] = [];
      informer.on('add', (o: k8s.KubernetesObject) => added.push(o.metadata?.name ?? ''));
      informer.on('error', () => undefined);
      await informer.start();
      await eventually(() => (added.includes('i1') ? true : undefined));
      await eventually(() => (server.requestCount(PATH) >= 2 ? true : undefined));
      const watchRequest = server.requests.filter((r) => r.path === PATH).at(-1);
      expect(watchRequest?.query).toMatchObject({ watch: 'true' });
      expect(Number(watchRequest?.query.resourceVersion)).toBeGreaterThan(0);

      await custom.createNamespacedCustomObject({ ...B, body: build('i2') });
      await eventually(() => (added.includes('i2') ? true : undefined));

      // The watch is cut and history compacted while a change happens: the informer must relist.
      const listsBefore = server.requests.filter(
        (r) => r.path === PATH && r.query.watch === undefined,
      ).length;
      server.compact();
      await custom.createNamespacedCustomObject({ ...B, body: build('i3') });
      server.compact();
      server.closeWatches();
      await eventually(() => (added.includes('i3') ? true : undefined));
      await eventually(() =>
        server.requests.filter((r) => r.path === PATH && r.query.watch === undefined).length >
        listsBefore
          ? true
          : undefined,
      );
      expect(
        informer
          .list(NS)
          .map((o) => o.metadata?.name)
          .sort(),
      ).toEqual(['i1', 'i2', 'i3']);
      await informer.stop();
    });
  });
});
