import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeApiServer } from '../support/kube/api-server.js';
import { classify, PROMISED, unpromised } from '../support/kube/conformance.js';

// The double's conformance list (test/support/kube/conformance.ts) against what it serves and
// against docs/adr/0041, whose tables must say the same.

const ROOT = join(__dirname, '..', '..');
const ADR = readFileSync(
  join(ROOT, 'docs', 'adr', '0041-what-the-kubernetes-double-promises.md'),
  'utf8',
);

/** The rows of the markdown table between `<!-- name:begin -->` and `<!-- name:end -->`. */
function table(name: string): string[][] {
  const block = new RegExp(`<!-- ${name}:begin -->\\n([\\s\\S]*?)<!-- ${name}:end -->`).exec(ADR);
  if (block === null) throw new Error(`no ${name} table in ADR 0041`);
  return block[1]!
    .trim()
    .split('\n')
    .slice(2)
    .map((row) =>
      row
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim().replace(/^`|`$/g, '')),
    );
}

describe('the conformance list of the API server double', () => {
  let server: KubeApiServer;

  beforeAll(async () => {
    // With Kueue installed, as the promises for kueue.x-k8s.io hold only then.
    server = await KubeApiServer.start({ crdDirectories: [join(ROOT, 'crds')], kueue: true });
  });

  afterAll(() => server.stop());

  it('is the table of ADR 0041, row for row', () => {
    const rows = table('conformance').map(([resource, verbs]) => [
      resource,
      verbs!.split(',').map((v) => v.trim()),
    ]);
    expect(rows).toEqual(Object.entries(PROMISED).map(([key, verbs]) => [key, [...verbs]]));
  });

  it('promises only resources and verbs the double serves in discovery', async () => {
    const served = new Map<string, string[]>();
    const groups = ['/api/v1'];
    const apis = (await (await fetch(`${server.url}/apis`)).json()) as {
      groups: Array<{ preferredVersion: { groupVersion: string } }>;
    };
    for (const group of apis.groups) groups.push(`/apis/${group.preferredVersion.groupVersion}`);
    for (const path of groups) {
      const list = (await (await fetch(`${server.url}${path}`)).json()) as {
        groupVersion: string;
        resources: Array<{ name: string; verbs: string[] }>;
      };
      const group = list.groupVersion.includes('/') ? list.groupVersion.split('/')[0] : 'core';
      for (const resource of list.resources)
        served.set(`${group}/${resource.name}`, resource.verbs);
    }
    for (const [key, verbs] of Object.entries(PROMISED)) {
      const offered = served.get(key);
      expect({ key, served: offered !== undefined }).toEqual({ key, served: true });
      // "apply" is a PATCH, so discovery lists it as patch.
      const needed = [...new Set(verbs.map((v) => (v === 'apply' ? 'patch' : v)))];
      expect({ key, missing: needed.filter((v) => !offered!.includes(v)) }).toEqual({
        key,
        missing: [],
      });
    }
  });

  it('names, for every behaviour, a test that exists', () => {
    const rows = table('behaviours');
    expect(rows.length).toBeGreaterThan(15);
    for (const [behaviour, file, test] of rows) {
      const path = join(ROOT, file!);
      expect({ behaviour, file, exists: existsSync(path) }).toEqual({
        behaviour,
        file,
        exists: true,
      });
      expect({ behaviour, named: readFileSync(path, 'utf8').includes(test!) }).toEqual({
        behaviour,
        named: true,
      });
    }
  });

  it('classifies requests by resource and verb, and reports the unpromised ones', () => {
    const request = (method: string, path: string, extra: Record<string, string> = {}) => ({
      method,
      path,
      query: extra,
    });
    expect(classify(request('GET', '/api/v1/namespaces/kiln/pods/p/log'))).toEqual({
      key: 'core/pods/log',
      verb: 'get',
    });
    expect(classify(request('GET', '/api/v1/namespaces/kiln'))).toEqual({
      key: 'core/namespaces',
      verb: 'get',
    });
    expect(
      classify(request('GET', '/apis/kiln.dev/v1alpha1/namespaces/b/builds', { watch: 'true' })),
    ).toEqual({ key: 'kiln.dev/builds', verb: 'watch' });
    expect(
      classify({
        ...request('PATCH', '/apis/apps/v1/namespaces/k/deployments/d'),
        contentType: 'application/apply-patch+yaml',
      }),
    ).toEqual({ key: 'apps/deployments', verb: 'apply' });
    expect(classify(request('GET', '/openapi/v3/apis/apps/v1'))).toEqual({
      path: '/openapi/v3/apis/apps/v1',
    });
    expect(
      unpromised([
        request('GET', '/version'),
        request('DELETE', '/apis/apps/v1/namespaces/k/deployments'),
        request('POST', '/apis/storage.k8s.io/v1/storageclasses'),
        request('GET', '/metrics'),
      ]),
    ).toEqual([
      'GET /metrics',
      'create storage.k8s.io/storageclasses',
      'deletecollection apps/deployments',
    ]);
  });
});
