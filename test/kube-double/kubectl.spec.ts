import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiServer } from '../support/kube/api-server.js';
import { FIXTURES_DIR } from '../support/kube/client.js';
import { writeKubeconfig } from '../support/kube/kubeconfig.js';
import { KUBECTL, type KubectlRun, kubectlWith } from '../support/kube/kubectl.js';
import { generateTlsMaterial } from '../support/kube/tls.js';
import { unpromised } from '../support/kube/conformance.js';

describe(`${KubeApiServer.name} with kubectl`, () => {
  let server: KubeApiServer;
  let dir: string;
  let kubeconfig: string;

  const kubectl = (...args: string[]): Promise<KubectlRun> => kubectlWith(kubeconfig, dir, ...args);
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const sample = join(FIXTURES_DIR, 'sample-build.yaml');

  beforeAll(async () => {
    server = await KubeApiServer.start({
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', 'builds'],
    });
    dir = mkdtempSync(join(tmpdir(), 'kubectl-double-'));
    kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server.url, 'builds');
  });

  afterAll(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies the sample Build, then reports it unchanged on a second apply', async () => {
    const first = await kubectl('apply', '-f', sample);
    expect(first).toMatchObject({ code: 0, stdout: 'build.kiln.dev/sample created\n' });
    const second = await kubectl('apply', '-f', sample);
    expect(second).toMatchObject({ code: 0, stdout: 'build.kiln.dev/sample unchanged\n' });
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'sample')?.spec).toMatchObject({
      method: 'kaniko',
      timeoutSeconds: 3600,
    });
  });

  it('lists Builds with the CRD printer columns, by plural and by short name', async () => {
    server.seed({
      ...server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'sample')!,
      status: {
        buildNumber: 42,
        conditions: [{ type: 'Succeeded', status: 'Unknown', reason: 'Running' }],
      },
    });
    const byPlural = await kubectl('get', 'builds');
    expect(byPlural.code).toBe(0);
    const [header, row] = byPlural.stdout.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'NUMBER', 'METHOD', 'STATUS', 'AGE']);
    expect(row?.split(/\s+/).slice(0, 4)).toEqual(['sample', '42', 'kaniko', 'Running']);
    expect(row?.split(/\s+/)[4]).toMatch(/^\d+s$/);
    const byShortName = (await kubectl('get', 'kb')).stdout.trim().split('\n');
    expect(byShortName.map((line) => line.split(/\s+/).slice(0, 4))).toEqual(
      [header, row].map((line) => line?.split(/\s+/).slice(0, 4)),
    );
  });

  it('prints one Build as YAML with server-set metadata and defaults', async () => {
    const result = await kubectl('get', 'build', 'sample', '-o', 'yaml');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^apiVersion: kiln\.dev\/v1alpha1\nkind: Build\n/);
    expect(result.stdout).toContain('  timeoutSeconds: 3600\n');
    expect(result.stdout).toMatch(/ {2}uid: [0-9a-f-]{36}\n/);
    expect(result.stdout).toContain('kubectl.kubernetes.io/last-applied-configuration');
  });

  it('merge-patches a Build and bumps its generation', async () => {
    const result = await kubectl(
      'patch',
      'build',
      'sample',
      '--type=merge',
      '-p',
      '{"spec":{"suspend":true}}',
    );
    expect(result).toMatchObject({ code: 0, stdout: 'build.kiln.dev/sample patched\n' });
    const stored = server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'sample');
    expect(stored?.spec).toMatchObject({ suspend: true });
    expect(stored?.metadata.generation).toBe(2);
  });

  it('fails a default (strategic) patch of a Build the way the real server does', async () => {
    const result = await kubectl('patch', 'build', 'sample', '-p', '{"spec":{"suspend":false}}');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      'application/strategic-merge-patch+json is not supported by kiln.dev/v1alpha1, Kind=Build',
    );
  });

  it('rejects an invalid Build with the 422 message of the real server', async () => {
    const bad = file(
      'bad.yaml',
      'apiVersion: kiln.dev/v1alpha1\nkind: Build\nmetadata:\n  name: b1\nspec:\n  tenantId: t\n  projectId: p\n  method: docker\n',
    );
    const result = await kubectl('apply', '-f', bad);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'The Build "b1" is invalid: spec.method: Unsupported value: "docker": supported values: "kaniko", "buildx", "container", "paketo", "packer"',
    );
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'b1')).toBeUndefined();
  });

  it('rejects an unknown field, since kubectl asks for strict field validation', async () => {
    const bad = file(
      'unknown.yaml',
      'apiVersion: kiln.dev/v1alpha1\nkind: Build\nmetadata:\n  name: b2\nspec:\n  tenantId: t\n  projectId: p\n  method: kaniko\n  colour: red\n',
    );
    const result = await kubectl('apply', '-f', bad);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('strict decoding error: unknown field "spec.colour"');
  });

  it('applies, re-applies (strategic merge) and patches a Job', async () => {
    // The fake kubelet keeps the Job running, so the suspend below is what the table shows.
    server.kubelet.script('busybox:1.36', { hang: true });
    const job = (label: string): string =>
      `apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: kiln-1\n  labels:\n    app: ${label}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: build\n          image: busybox:1.36\n`;
    expect(await kubectl('apply', '-f', file('job.yaml', job('a')))).toMatchObject({
      code: 0,
      stdout: 'job.batch/kiln-1 created\n',
    });
    expect(await kubectl('apply', '-f', file('job2.yaml', job('b')))).toMatchObject({
      code: 0,
      stdout: 'job.batch/kiln-1 configured\n',
      stderr: '',
    });
    expect(
      server.requests
        .filter((r) => r.method === 'PATCH' && r.path.endsWith('/jobs/kiln-1'))
        .map((r) => r.contentType),
    ).toEqual(['application/strategic-merge-patch+json']);
    expect(
      await kubectl('patch', 'job', 'kiln-1', '-p', '{"spec":{"suspend":true}}'),
    ).toMatchObject({ code: 0 });
    const stored = server.object('batch/v1', 'jobs', 'builds', 'kiln-1');
    expect(stored?.metadata.labels).toEqual({ app: 'b' });
    expect(stored?.spec).toMatchObject({ suspend: true, backoffLimit: 0 });
    const table = await kubectl('get', 'jobs');
    expect(table.stdout.split('\n')[0]?.split(/\s+/)).toEqual([
      'NAME',
      'STATUS',
      'COMPLETIONS',
      'DURATION',
      'AGE',
    ]);
    expect(table.stdout.split('\n')[1]?.split(/\s+/).slice(0, 3)).toEqual([
      'kiln-1',
      'Suspended',
      '0/1',
    ]);
  });

  it('applies server-side with kubectl as the field manager', async () => {
    const result = await kubectl(
      'apply',
      '--server-side',
      '-f',
      file(
        'ssa.yaml',
        'apiVersion: kiln.dev/v1alpha1\nkind: Build\nmetadata:\n  name: ssa\nspec:\n  tenantId: t\n  projectId: p\n  method: buildx\n',
      ),
    );
    expect(result).toMatchObject({ code: 0, stdout: 'build.kiln.dev/ssa serverside-applied\n' });
    const managers = server
      .object('kiln.dev/v1alpha1', 'builds', 'builds', 'ssa')
      ?.metadata.managedFields?.map((m) => `${m.manager as string}/${m.operation as string}`);
    expect(managers).toEqual(['kubectl/Apply']);
  });

  it('deletes a Build and a Job, waiting until they are gone', async () => {
    expect(await kubectl('delete', 'build', 'sample')).toMatchObject({
      code: 0,
      stdout: 'build.kiln.dev "sample" deleted from builds namespace\n',
    });
    expect(await kubectl('delete', '-f', join(dir, 'job.yaml'))).toMatchObject({
      code: 0,
      stdout: 'job.batch "kiln-1" deleted from builds namespace\n',
    });
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'sample')).toBeUndefined();
    expect(server.object('batch/v1', 'jobs', 'builds', 'kiln-1')).toBeUndefined();
    expect((await kubectl('get', 'builds', 'sample')).stderr.trim()).toBe(
      'Error from server (NotFound): builds.kiln.dev "sample" not found',
    );
  });

  it('waits on a finalizer: delete --wait=false returns while the Build stays until the finalizer goes', async () => {
    expect(
      await kubectl(
        'apply',
        '-f',
        file(
          'fin.yaml',
          'apiVersion: kiln.dev/v1alpha1\nkind: Build\nmetadata:\n  name: fin\n  finalizers: [kiln.dev/logs]\nspec:\n  tenantId: t\n  projectId: p\n  method: kaniko\n',
        ),
      ),
    ).toMatchObject({ code: 0 });
    expect(await kubectl('delete', 'build', 'fin', '--wait=false')).toMatchObject({ code: 0 });
    expect(
      server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'fin')?.metadata.deletionTimestamp,
    ).toBeDefined();
    expect(
      await kubectl(
        'patch',
        'build',
        'fin',
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/metadata/finalizers"}]',
      ),
    ).toMatchObject({ code: 0 });
    expect(server.object('kiln.dev/v1alpha1', 'builds', 'builds', 'fin')).toBeUndefined();
  });

  it('decodes the protobuf typed clients send for Secrets, ConfigMaps and Namespaces, and refuses it for other kinds with 415', async () => {
    expect(await kubectl('create', 'namespace', 'typed')).toMatchObject({
      code: 0,
      stdout: 'namespace/typed created\n',
    });
    expect(
      await kubectl(
        '-n',
        'typed',
        'create',
        'secret',
        'generic',
        'token',
        '--from-literal=token=s3cr=t',
        '--type=kiln.dev/token',
      ),
    ).toMatchObject({ code: 0, stdout: 'secret/token created\n' });
    expect(
      await kubectl('-n', 'typed', 'create', 'configmap', 'settings', '--from-literal=a=1'),
    ).toMatchObject({ code: 0, stdout: 'configmap/settings created\n' });
    expect(server.object('v1', 'secrets', 'typed', 'token')).toMatchObject({
      type: 'kiln.dev/token',
      data: { token: Buffer.from('s3cr=t').toString('base64') },
    });
    expect(server.object('v1', 'configmaps', 'typed', 'settings')).toMatchObject({
      data: { a: '1' },
    });
    expect(
      server.requests.filter(
        (r) => r.method === 'POST' && r.contentType === 'application/vnd.kubernetes.protobuf',
      ),
    ).toHaveLength(3);
    const refused = await kubectl('-n', 'builds', 'create', 'serviceaccount', 'robot');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml',
    );
  });

  it('sent only requests the double promises to serve faithfully (docs/adr/0041)', () => {
    expect(unpromised(server.requests)).toEqual([]);
  });
});

describe('npm run kube:double', () => {
  it('starts the double standalone and writes a kubeconfig kubectl can use', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-double-cli-'));
    const child = spawn(
      process.execPath,
      [
        'scripts/kube-double.cjs',
        '--port',
        '0',
        '--namespace',
        'builds',
        '--kubeconfig',
        join(dir, 'config'),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no kubeconfig line in: ${out}`)), 10_000);
        child.stdout.on('data', () => {
          if (out.includes('kubeconfig: ')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      expect(out).toContain(`kubeconfig: ${join(dir, 'config')}`);
      const result = await new Promise<string>((resolve) =>
        execFile(
          KUBECTL,
          ['--kubeconfig', join(dir, 'config'), '--cache-dir', join(dir, 'cache'), 'get', 'builds'],
          (_e, stdout, stderr) => resolve(stdout + stderr),
        ),
      );
      expect(result.trim()).toBe('No resources found in builds namespace.');
      const created = await new Promise<string>((resolve) =>
        execFile(
          KUBECTL,
          [
            '--kubeconfig',
            join(dir, 'config'),
            '--cache-dir',
            join(dir, 'cache'),
            'create',
            'namespace',
            'x',
          ],
          (_e, stdout, stderr) => resolve(stdout + stderr),
        ),
      );
      // kubectl's typed create sends protobuf, which the double decodes for Namespaces.
      expect(created.trim()).toBe('namespace/x created');
    } finally {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe(`${KubeApiServer.name} with kubectl over TLS`, () => {
  let server: KubeApiServer;
  let dir: string;

  beforeAll(async () => {
    server = await KubeApiServer.start({
      tls: true,
      token: 'kubectl-token',
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', 'builds'],
    });
    dir = mkdtempSync(join(tmpdir(), 'kubectl-double-tls-'));
  });

  afterAll(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gets builds, verifying the certificate with the CA of the written kubeconfig', async () => {
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server, 'builds');
    expect(readFileSync(kubeconfig, 'utf8')).toContain('certificate-authority-data: ');
    expect(readFileSync(kubeconfig, 'utf8')).not.toContain('insecure-skip-tls-verify');
    const empty = await kubectlWith(kubeconfig, dir, 'get', 'builds');
    expect(empty).toMatchObject({ code: 0, stderr: 'No resources found in builds namespace.\n' });
    server.seed({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: { name: 'tls', namespace: 'builds' },
      spec: { tenantId: 't', projectId: 'p', method: 'kaniko' },
    });
    const one = await kubectlWith(kubeconfig, dir, 'get', 'builds', '-o', 'name');
    expect(one).toMatchObject({ code: 0, stdout: 'build.kiln.dev/tls\n' });
    expect(
      server.requests.filter((r) => r.path === '/apis/kiln.dev/v1alpha1/namespaces/builds/builds'),
    ).toHaveLength(2);
  });

  it('refuses the server when the kubeconfig has another CA', async () => {
    const other = generateTlsMaterial('other');
    const kubeconfig = writeKubeconfig(join(dir, 'other-ca'), {
      url: server.url,
      caPem: other.caPem,
      token: 'kubectl-token',
    });
    const result = await kubectlWith(kubeconfig, dir, 'get', 'builds');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('x509: certificate signed by unknown authority');
  });

  it('gets 401 Unauthorized with a wrong token', async () => {
    const kubeconfig = writeKubeconfig(join(dir, 'wrong-token'), server, 'builds', 'nope');
    const result = await kubectlWith(kubeconfig, dir, 'get', 'builds');
    expect(result.code).not.toBe(0);
    expect(result.stderr.trim().split('\n').at(-1)).toBe(
      'error: You must be logged in to the server (Unauthorized)',
    );
  });
});

describe('npm run kube:double -- --tls', () => {
  it('serves TLS and writes a kubeconfig with the CA that kubectl uses', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-double-cli-tls-'));
    const config = join(dir, 'config');
    const child = spawn(
      process.execPath,
      [
        'scripts/kube-double.cjs',
        '--port',
        '0',
        '--tls',
        '--namespace',
        'builds',
        '--kubeconfig',
        config,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no kubeconfig line in: ${out}`)), 10_000);
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('kubeconfig: ')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      expect(out).toMatch(/^kube double listening on https:\/\/127\.0\.0\.1:\d+ /);
      expect(out).toContain(`ca: ${config}-ca.crt\nkubeconfig: ${config}\n`);
      const yaml = readFileSync(config, 'utf8');
      const ca = readFileSync(`${config}-ca.crt`, 'utf8');
      expect(yaml).toContain(`certificate-authority-data: ${Buffer.from(ca).toString('base64')}\n`);
      expect(yaml).toMatch(/server: https:\/\/127\.0\.0\.1:\d+\n/);
      const result = await kubectlWith(config, dir, 'get', 'builds');
      expect(result).toMatchObject({
        code: 0,
        stderr: 'No resources found in builds namespace.\n',
      });
    } finally {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
