import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeApiError, KubeUnavailableError } from './errors.js';
import { KubeClient } from './kube-client.js';
import { kubeVerb } from './request-metrics.js';
import { Metrics } from '../metrics/metrics.js';
import { parsePrometheusText, sumOf } from '../../test/support/prometheus-text.js';

describe(KubeClient.name, () => {
  let server: Server;
  let baseUrl: string;
  const seen: IncomingMessage[] = [];
  let connections = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      if (req.url?.startsWith('/apis/kiln.dev/') === true) return answerJson(req, res);
      if (req.url === '/version' && req.headers.authorization === 'Bearer test-token') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            major: '1',
            minor: '32',
            gitVersion: 'v1.32.0',
            platform: 'linux/amd64',
          }),
        );
        return;
      }
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          code: 401,
          reason: 'Unauthorized',
        }),
      );
    });
    server.on('connection', () => connections++);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((done) => server.close(done));
  });

  it('loads the ESM-only client-node under jest and reads the server version over real HTTP', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'test-token',
      namespace: 'builds',
    });

    await expect(client.serverVersion()).resolves.toEqual({
      major: '1',
      minor: '32',
      gitVersion: 'v1.32.0',
    });
    expect(client.namespace).toBe('builds');
    expect(seen.at(-1)?.headers['user-agent']).toBe('kiln');
  });

  it('names the part of kiln that sent a request in its User-Agent', async () => {
    const client = KubeClient.connect(
      { kind: 'server', server: baseUrl, token: 'test-token', namespace: 'builds' },
      'kiln-operator',
    );
    await client.serverVersion();
    expect(seen.at(-1)?.headers['user-agent']).toBe('kiln-operator');
  });

  it('reuses kept-alive connections instead of opening one per request', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'test-token',
      namespace: 'builds',
    });
    const before = connections;

    for (let i = 0; i < 10; i++) await client.serverVersion();

    // undici hands a connection back a moment after the response: the second request may open
    // a second one; every later request finds one of them idle.
    expect(connections - before).toBeLessThanOrEqual(2);
    expect(seen.slice(-10).map((r) => r.headers.authorization)).toEqual(
      Array(10).fill('Bearer test-token'),
    );
  });

  describe('json (the writes of every build, without the generated clients)', () => {
    const client = () =>
      KubeClient.connect(
        { kind: 'server', server: baseUrl, token: 'test-token', namespace: 'builds' },
        'kiln-api',
      );
    const path = '/apis/kiln.dev/v1alpha1/namespaces/builds/builds';

    it('sends the body as JSON of the given type, authenticated and named, and answers the JSON as sent', async () => {
      const answer = await client().json<{ echoed: unknown; at: unknown }>(
        'PATCH',
        `${path}/b1`,
        { spec: { suspend: false } },
        'application/merge-patch+json',
      );

      expect(answer).toEqual({
        echoed: {
          method: 'PATCH',
          contentType: 'application/merge-patch+json',
          body: { spec: { suspend: false } },
        },
        // Not a Date: the answer is not turned into client-node's models.
        at: '2026-11-27T12:00:00Z',
      });
      expect(seen.at(-1)?.headers).toMatchObject({
        authorization: 'Bearer test-token',
        'user-agent': 'kiln-api',
      });
    });

    it('throws KubeApiError with the Status reason for a refusal, KubeUnavailableError for a 5xx or no server', async () => {
      await expect(client().json('GET', `${path}/missing`)).rejects.toEqual(
        new KubeApiError(404, 'NotFound', 'builds.kiln.dev "missing" not found'),
      );
      await expect(client().json('GET', `${path}/overloaded`)).rejects.toBeInstanceOf(
        KubeUnavailableError,
      );
      const nowhere = KubeClient.connect({
        kind: 'server',
        server: 'http://127.0.0.1:9',
        token: 'test-token',
        namespace: 'builds',
      });
      await expect(nowhere.json('GET', path)).rejects.toBeInstanceOf(KubeUnavailableError);
    });
  });

  it('counts every request it sends by verb and status code, and one that got no answer as error', async () => {
    const metrics = new Metrics({ tenantLabels: false });
    const target = {
      kind: 'server' as const,
      server: baseUrl,
      token: 'test-token',
      namespace: 'b',
    };
    const client = KubeClient.connect(target, 'kiln-operator', metrics);
    const path = '/apis/kiln.dev/v1alpha1/namespaces/builds/builds';

    await client.serverVersion();
    await client.json('PATCH', `${path}/b1`, { spec: {} }, 'application/merge-patch+json');
    await client.json('POST', path, { metadata: { name: 'b2' } });
    await client.json('GET', path);
    await expect(client.json('GET', `${path}/missing`)).rejects.toBeInstanceOf(KubeApiError);
    await expect(client.json('DELETE', `${path}/overloaded`)).rejects.toBeInstanceOf(
      KubeUnavailableError,
    );
    const nowhere = KubeClient.connect(
      { ...target, server: 'http://127.0.0.1:9' },
      'kiln-operator',
      metrics,
    );
    await expect(nowhere.json('GET', `${path}/b1`)).rejects.toBeInstanceOf(KubeUnavailableError);

    const families = parsePrometheusText((await metrics.render()).body);
    const samples = families
      .get('kiln_kube_api_requests_total')
      ?.samples.map((sample) => `${sample.labels['verb']} ${sample.labels['code']} ${sample.value}`)
      .sort();
    expect(samples).toEqual([
      'create 200 1',
      'delete 503 1',
      'get 200 1',
      'get 404 1',
      'get error 1',
      'list 200 1',
      'patch 200 1',
    ]);
    expect(sumOf(families, 'kiln_kube_api_requests_total')).toBe(7);
  });

  it('tells the verbs apart as the API server does: watch and list from get by query and path', () => {
    const table: Array<[string, string, string]> = [
      ['GET', '/api/v1/namespaces/kiln/pods?labelSelector=a%3Db&limit=500', 'list'],
      ['GET', '/api/v1/namespaces/kiln/pods?watch=true&resourceVersion=7', 'watch'],
      ['GET', '/api/v1/namespaces/kiln/pods/p1', 'get'],
      ['GET', '/api/v1/namespaces/kiln/pods/p1/log?follow=true', 'get'],
      ['GET', '/api/v1/namespaces', 'list'],
      ['GET', '/api/v1/namespaces/kiln', 'get'],
      ['GET', '/apis/kiln.dev/v1alpha1/namespaces/kiln/builds', 'list'],
      ['GET', '/apis/kiln.dev/v1alpha1/namespaces/kiln/builds/b1', 'get'],
      ['GET', '/apis/kiln.dev/v1alpha1/builds?watch=1', 'watch'],
      ['GET', '/apis/coordination.k8s.io/v1/namespaces/kiln/leases/kiln-operator', 'get'],
      ['GET', '/version', 'get'],
      ['POST', '/apis/batch/v1/namespaces/kiln/jobs', 'create'],
      ['PUT', '/apis/coordination.k8s.io/v1/namespaces/kiln/leases/kiln-operator', 'update'],
      ['PATCH', '/apis/kiln.dev/v1alpha1/namespaces/kiln/builds/b1/status', 'patch'],
      ['DELETE', '/apis/batch/v1/namespaces/kiln/jobs/j1?propagationPolicy=Background', 'delete'],
    ];
    expect(table.map(([method, path]) => kubeVerb(method, path))).toEqual(
      table.map(([, , verb]) => verb),
    );
  });

  it('surfaces a rejected credential as an error', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'wrong',
      namespace: 'builds',
    });

    await expect(client.serverVersion()).rejects.toMatchObject({ code: 401 });
  });
});

/** The custom-resource routes of the test server: an echo, a 404 Status and a 503. */
function answerJson(req: IncomingMessage, res: ServerResponse): void {
  const status = (code: number, reason: string, message: string) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', code, reason, message }));
  };
  if (req.url?.endsWith('/missing') === true)
    return status(404, 'NotFound', 'builds.kiln.dev "missing" not found');
  if (req.url?.endsWith('/overloaded') === true)
    return status(503, 'ServiceUnavailable', 'try later');
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        echoed: {
          method: req.method,
          contentType: req.headers['content-type'],
          body: body === '' ? null : JSON.parse(body),
        },
        at: '2026-11-27T12:00:00Z',
      }),
    );
  });
}
