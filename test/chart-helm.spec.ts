import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { helmWith, type KubectlRun } from './support/kube/kubectl.js';
import { unpromised } from './support/kube/conformance.js';

// charts/kiln through helm 4 itself (scripts/kube-tools.sh): lint and template for every example
// values file, then install, upgrade, test and uninstall against the API server double, the way
// a user runs them against a cluster. helm reaches the double only over HTTP: discovery, OpenAPI,
// server-side apply, a streaming-list watch for `helm test`, and its release Secrets in protobuf.

const ROOT = join(__dirname, '..');
const CHART = join(ROOT, 'charts', 'kiln');
const EXAMPLES = readdirSync(join(CHART, 'ci'))
  .filter((file) => file.endsWith('.yaml'))
  .sort();
const EVALUATION = join(CHART, 'ci', 'evaluation-values.yaml');
/** The image the chart's test pod runs (kiln's own), as `kiln.image` renders it by default. */
const KILN_IMAGE = 'kiln';

const ok = (run: KubectlRun): string => {
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  return run.stdout;
};

describe('charts/kiln with helm', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-chart-helm-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const helm = (...args: string[]): Promise<KubectlRun> => helmWith(kubeconfig, dir, ...args);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(EXAMPLES)('lints (--strict) and renders with ci/%s', async (file) => {
    const values = join(CHART, 'ci', file);
    const lint = await helm('lint', '--strict', CHART, '--values', values);
    expect(lint.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    ok(lint);
    const rendered = ok(await helm('template', 'kiln', CHART, '-n', 'kiln', '--values', values));
    expect(rendered).toContain('kind: Deployment');
  });

  it('refuses to render without a database, saying which values to set', async () => {
    const run = await helm('template', 'kiln', CHART, '-n', 'kiln');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('database.existingSecret is required');
  });

  describe('against the API server double', () => {
    let server: KubeApiServer;

    /** The objects of a kind in a namespace (or cluster-wide), by name. */
    const names = (apiVersion: string, plural: string, namespace?: string): string[] =>
      server
        .objects(apiVersion, plural, namespace)
        .map((o) => o.metadata.name ?? '')
        .sort();
    const releases = (): Array<{ name: string; status: string }> =>
      server
        .objects('v1', 'secrets', 'kiln')
        .filter((s) => s.metadata.labels?.['owner'] === 'helm')
        .map((s) => ({
          name: s.metadata.name ?? '',
          status: s.metadata.labels?.['status'] ?? '',
        }))
        .sort((a, b) => a.name.localeCompare(b.name));

    beforeAll(async () => {
      // No CRD and no kiln namespaces yet: the chart brings them.
      server = await KubeApiServer.start({ namespaces: ['default', 'kube-system'] });
      writeKubeconfig(kubeconfig, server.url, 'default');
    });

    afterAll(() => server.stop());

    it('installs: every object of the chart, the CRD served, the release stored as helm stores it', async () => {
      const out = ok(
        await helm('install', 'kiln', CHART, '-n', 'kiln', '--create-namespace', '-f', EVALUATION),
      );
      expect(out).toContain('STATUS: deployed');
      const manifest = ok(await helm('get', 'manifest', 'kiln', '-n', 'kiln'));
      type Manifest = {
        apiVersion: string;
        kind: string;
        metadata: { name: string; namespace?: string };
      };
      const documents = manifest
        .split(/^---$/m)
        .map((d) => parse(d) as Manifest | null)
        .filter((d): d is Manifest => !!d?.kind);
      // Every object helm says it installed is in the API server.
      const missing = documents.filter(
        (d) =>
          !server.object(d.apiVersion, d.kind, d.metadata.namespace ?? 'kiln', d.metadata.name),
      );
      expect(documents.length).toBeGreaterThan(15);
      expect(missing).toEqual([]);
      expect(names('apps/v1', 'deployments', 'kiln')).toEqual(['kiln-api', 'kiln-operator']);
      expect(names('apiextensions.k8s.io/v1', 'customresourcedefinitions')).toEqual([
        'builds.kiln.dev',
      ]);
      expect(names('v1', 'secrets', 'kiln')).toEqual(
        expect.arrayContaining(['kiln-jwt', 'sh.helm.release.v1.kiln.v1']),
      );
      expect(releases()).toEqual([{ name: 'sh.helm.release.v1.kiln.v1', status: 'deployed' }]);
      // helm's release storage writes through a typed client, in protobuf.
      expect(
        server.requests.some(
          (r) =>
            r.method === 'POST' &&
            r.path === '/api/v1/namespaces/kiln/secrets' &&
            r.contentType === 'application/vnd.kubernetes.protobuf',
        ),
      ).toBe(true);
      // The CRD the chart installed is served.
      expect(server.objects('kiln.dev/v1alpha1', 'builds', 'kiln-builds')).toEqual([]);
    });

    it('upgrades with a changed value: the Deployment changes, the old release is superseded', async () => {
      const out = ok(
        await helm(
          'upgrade',
          'kiln',
          CHART,
          '-n',
          'kiln',
          '-f',
          EVALUATION,
          '--set',
          'api.replicas=3',
        ),
      );
      expect(out).toContain('REVISION: 2');
      expect(server.object('apps/v1', 'deployments', 'kiln', 'kiln-api')?.['spec']).toMatchObject({
        replicas: 3,
      });
      expect(releases()).toEqual([
        { name: 'sh.helm.release.v1.kiln.v1', status: 'superseded' },
        { name: 'sh.helm.release.v1.kiln.v2', status: 'deployed' },
      ]);
      const values = ok(await helm('get', 'values', 'kiln', '-n', 'kiln', '-o', 'json'));
      expect(JSON.parse(values)).toMatchObject({ api: { replicas: 3 } });
    });

    it('helm test runs the test pod through the kubelet: Succeeded when /readyz answers 200, Failed otherwise', async () => {
      server.kubelet.script(KILN_IMAGE, { lines: ['200 {"status":"ok"}'], exitCode: 0 });
      const passed = await helm('test', 'kiln', '-n', 'kiln', '--timeout', '60s', '--logs');
      expect(ok(passed)).toMatch(/TEST SUITE:\s+kiln-test-readyz[\s\S]*Phase:\s+Succeeded/);
      expect(passed.stdout).toContain('200 {"status":"ok"}');
      // The hook's delete policy (hook-succeeded) removed the pod.
      expect(names('v1', 'pods', 'kiln')).not.toContain('kiln-test-readyz');

      server.kubelet.script(KILN_IMAGE, { lines: ['503 {"status":"unavailable"}'], exitCode: 1 });
      const failed = await helm('test', 'kiln', '-n', 'kiln', '--timeout', '60s');
      expect(failed.code).not.toBe(0);
      expect(failed.stdout).toMatch(/Phase:\s+Failed/);
      // A failed test pod stays for `kubectl logs`.
      expect(names('v1', 'pods', 'kiln')).toContain('kiln-test-readyz');
    });

    it('uninstalls: the CRD, the build namespace and the key Secrets stay, everything else goes', async () => {
      const out = ok(await helm('uninstall', 'kiln', '-n', 'kiln', '--wait', '--timeout', '60s'));
      expect(out).toContain('release "kiln" uninstalled');
      expect(out).toMatch(/These resources were kept due to the resource policy:/);
      expect(names('apiextensions.k8s.io/v1', 'customresourcedefinitions')).toEqual([
        'builds.kiln.dev',
      ]);
      expect(names('v1', 'secrets', 'kiln')).toEqual(['kiln-jwt', 'kiln-secrets-key']);
      expect(names('v1', 'namespaces')).toContain('kiln-builds');
      for (const [apiVersion, plural] of [
        ['apps/v1', 'deployments'],
        ['apps/v1', 'statefulsets'],
        ['v1', 'services'],
        ['v1', 'serviceaccounts'],
        ['rbac.authorization.k8s.io/v1', 'roles'],
        ['rbac.authorization.k8s.io/v1', 'rolebindings'],
        ['policy/v1', 'poddisruptionbudgets'],
      ] as const)
        expect({ plural, left: names(apiVersion, plural, 'kiln') }).toEqual({ plural, left: [] });
      expect(releases()).toEqual([]);
      expect(ok(await helm('list', '-n', 'kiln', '-q'))).toBe('');
    });

    it('sent only requests the double promises to serve faithfully (docs/adr/0041)', () => {
      expect(unpromised(server.requests)).toEqual([]);
    });
  });
});
