import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { KubeApiServer } from '../support/kube/api-server.js';
import {
  eventually,
  expectStatus,
  FIXTURES_DIR,
  k8s,
  kubeConfigFor,
} from '../support/kube/client.js';
import { kubeconfigYaml, writeKubeconfig } from '../support/kube/kubeconfig.js';
import { generateTlsMaterial } from '../support/kube/tls.js';

interface Reply {
  status: number;
  body: string;
  peer: PeerCertificate;
}

/** One GET over https with node:https, trusting only `ca`. */
const get = (
  server: KubeApiServer,
  path: string,
  options: { ca?: string; headers?: Record<string, string>; servername?: string } = {},
): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = request(
      `${server.url}${path}`,
      {
        // A fresh connection each time: a kept-alive one may be a socket goOffline destroyed.
        agent: false,
        ca: options.ca ?? server.caPem,
        headers: options.headers ?? {},
        ...(options.servername ? { servername: options.servername } : {}),
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, peer }));
      },
    );
    req.on('error', reject);
    req.end();
  });

describe(`${KubeApiServer.name} over TLS`, () => {
  let server: KubeApiServer;

  beforeAll(async () => {
    server = await KubeApiServer.start({
      tls: true,
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', 'builds'],
    });
  });

  afterAll(() => server.stop());

  it('serves https on 127.0.0.1 with a certificate for 127.0.0.1 and localhost', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(server.caPem).toMatch(
      /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/,
    );
    const byIp = await get(server, '/version');
    expect(byIp.status).toBe(200);
    expect(byIp.peer.subjectaltname).toBe('IP Address:127.0.0.1, DNS:localhost');
    // The name a client checks is the one it asked for: localhost is covered as well.
    expect((await get(server, '/version', { servername: 'localhost' })).status).toBe(200);
  });

  it('lets client-node talk to it with certificate verification on', async () => {
    const api = kubeConfigFor(server, 'builds').makeApiClient(k8s.CustomObjectsApi);
    await api.createNamespacedCustomObject({
      group: 'kiln.dev',
      version: 'v1alpha1',
      namespace: 'builds',
      plural: 'builds',
      body: {
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name: 'over-tls' },
        spec: { tenantId: 't', projectId: 'p', method: 'kaniko' },
      },
    });
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'over-tls')).toBeDefined();
  });

  it('streams a watch to client-node over verified TLS', async () => {
    const config = kubeConfigFor(server, 'builds');
    const seen: string[] = [];
    const controller = await new k8s.Watch(config).watch(
      '/apis/kiln.dev/v1alpha1/namespaces/builds/builds',
      { resourceVersion: server.store.currentRv },
      (type, object: { metadata?: { name?: string } }) =>
        seen.push(`${type} ${object.metadata?.name ?? ''}`),
      () => undefined,
    );
    try {
      await config.makeApiClient(k8s.CustomObjectsApi).createNamespacedCustomObject({
        group: 'kiln.dev',
        version: 'v1alpha1',
        namespace: 'builds',
        plural: 'builds',
        body: {
          apiVersion: 'kiln.dev/v1alpha1',
          kind: 'Build',
          metadata: { name: 'watched' },
          spec: { tenantId: 't', projectId: 'p', method: 'kaniko' },
        },
      });
      expect(await eventually(() => (seen.length > 0 ? seen : undefined))).toEqual([
        'ADDED watched',
      ]);
    } finally {
      controller.abort();
    }
  });

  it('reads a kubeconfig with certificate-authority-data (no skip-TLS-verify)', async () => {
    const yaml = kubeconfigYaml(server, 'builds');
    expect(yaml).toContain(
      `certificate-authority-data: ${Buffer.from(server.caPem!).toString('base64')}\n`,
    );
    expect(yaml).not.toContain('insecure-skip-tls-verify');
    const config = new k8s.KubeConfig();
    config.loadFromString(yaml);
    expect(config.getCurrentCluster()).toMatchObject({ server: server.url, skipTLSVerify: false });
    const list = await config
      .makeApiClient(k8s.CoreV1Api)
      .listNamespace()
      .then((l) => l.items.map((n) => n.metadata?.name));
    expect(list).toEqual(['builds', 'default']);
  });

  it('fails verification for a client that trusts another CA', async () => {
    const other = generateTlsMaterial('other');
    // The server sends only its own certificate, so the client cannot chain it to a CA it trusts.
    await expect(get(server, '/version', { ca: other.caPem })).rejects.toMatchObject({
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    const api = kubeConfigFor({ url: server.url, caPem: other.caPem }).makeApiClient(k8s.CoreV1Api);
    const before = server.requests.length;
    await expect(api.listNamespace()).rejects.toMatchObject({
      message: 'fetch failed',
      cause: { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' },
    });
    expect(server.requests).toHaveLength(before);
  });

  it('fails verification for a name the certificate does not cover', async () => {
    await expect(
      get(server, '/version', { servername: 'kubernetes.default.svc' }),
    ).rejects.toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  });

  it('keeps TLS across goOffline/goOnline', async () => {
    await server.unreachableFor(10);
    expect((await get(server, '/version')).status).toBe(200);
  });
});

describe(`${KubeApiServer.name} with a bearer token`, () => {
  let server: KubeApiServer;

  beforeAll(async () => {
    server = await KubeApiServer.start({ tls: true, token: 'abc', namespaces: ['default'] });
  });

  afterAll(() => server.stop());

  it('answers 401 Unauthorized without a token or with a wrong one', async () => {
    const unauthorized = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'Unauthorized',
      reason: 'Unauthorized',
      code: 401,
    };
    const wrong: Record<string, string>[] = [
      {},
      { authorization: 'Bearer abd' },
      { authorization: 'Basic abc' },
    ];
    for (const headers of wrong) {
      const reply = await get(server, '/api/v1/namespaces', { headers });
      expect(reply.status).toBe(401);
      expect(JSON.parse(reply.body)).toEqual(unauthorized);
    }
    // client-node keeps no body for a 401 (its generated code expects none), only the code.
    const api = kubeConfigFor(server, 'default', 'wrong').makeApiClient(k8s.CoreV1Api);
    expect(await expectStatus(api.listNamespace())).toMatchObject({ code: 401 });
  });

  it('serves a request with the right token', async () => {
    const reply = await get(server, '/api/v1/namespaces', {
      headers: { authorization: 'Bearer abc' },
    });
    expect(reply.status).toBe(200);
    const api = kubeConfigFor(server, 'default', 'abc').makeApiClient(k8s.CoreV1Api);
    expect((await api.listNamespace()).items.map((n) => n.metadata?.name)).toEqual(['default']);
  });

  it('puts its token into the kubeconfig it is given to', () => {
    expect(kubeconfigYaml(server)).toContain('      token: abc\n');
    expect(kubeconfigYaml(server, 'default', 'override')).toContain('      token: override\n');
  });
});

describe('client-node in cluster (loadFromCluster) against the TLS double', () => {
  let server: KubeApiServer;
  let prefix: string;
  const saved: Record<string, string | undefined> = {};
  const ENV = ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT'] as const;

  beforeAll(async () => {
    server = await KubeApiServer.start({
      tls: true,
      token: 'sa-token',
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', 'builds'],
    });
    prefix = mkdtempSync(join(tmpdir(), 'kube-double-incluster-'));
    const sa = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), 'sa-token');
    writeFileSync(join(sa, 'ca.crt'), server.caPem!);
    writeFileSync(join(sa, 'namespace'), 'builds');
    for (const name of ENV) saved[name] = process.env[name];
    process.env.KUBERNETES_SERVICE_HOST = '127.0.0.1';
    process.env.KUBERNETES_SERVICE_PORT = String(server.port);
  });

  afterAll(async () => {
    for (const name of ENV) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
    await server.stop();
    rmSync(prefix, { recursive: true, force: true });
  });

  it('talks to the double over verified TLS with the service account token and namespace', async () => {
    const config = new k8s.KubeConfig();
    config.loadFromCluster(prefix);
    expect(config.getCurrentCluster()).toMatchObject({
      server: server.url,
      skipTLSVerify: false,
      caFile: join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount/ca.crt'),
    });
    const namespace = config.getContextObject(config.getCurrentContext())?.namespace;
    expect(namespace).toBe('builds');
    const api = config.makeApiClient(k8s.CustomObjectsApi);
    await api.createNamespacedCustomObject({
      group: 'kiln.dev',
      version: 'v1alpha1',
      namespace: namespace!,
      plural: 'builds',
      body: {
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name: 'in-cluster' },
        spec: { tenantId: 't', projectId: 'p', method: 'kaniko' },
      },
    });
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'in-cluster')).toBeDefined();
    // 401 on any request without the token: the create above really carried it.
    const noToken = kubeConfigFor(server, 'builds', 'not-the-sa-token');
    expect(await expectStatus(noToken.makeApiClient(k8s.CoreV1Api).listNamespace())).toMatchObject({
      code: 401,
    });
  });

  it('fails when ca.crt is another CA', async () => {
    const otherPrefix = mkdtempSync(join(tmpdir(), 'kube-double-incluster-'));
    try {
      const sa = join(otherPrefix, 'var/run/secrets/kubernetes.io/serviceaccount');
      mkdirSync(sa, { recursive: true });
      writeFileSync(join(sa, 'token'), 'sa-token');
      writeFileSync(join(sa, 'ca.crt'), generateTlsMaterial('other').caPem);
      const config = new k8s.KubeConfig();
      config.loadFromCluster(otherPrefix);
      await expect(config.makeApiClient(k8s.CoreV1Api).listNamespace()).rejects.toMatchObject({
        cause: { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' },
      });
    } finally {
      rmSync(otherPrefix, { recursive: true, force: true });
    }
  });
});

describe('kubeconfig writer', () => {
  it('keeps insecure-skip-tls-verify for http servers', async () => {
    const server = await KubeApiServer.start({ namespaces: ['default'] });
    const dir = mkdtempSync(join(tmpdir(), 'kube-double-kc-'));
    try {
      const path = writeKubeconfig(join(dir, 'config'), server.url);
      const config = new k8s.KubeConfig();
      config.loadFromFile(path);
      expect(config.getCurrentCluster()).toMatchObject({
        server: server.url,
        skipTLSVerify: true,
      });
      expect(server.caPem).toBeUndefined();
      expect((await config.makeApiClient(k8s.CoreV1Api).listNamespace()).items).toHaveLength(1);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
