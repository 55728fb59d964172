import { KubeApiServer } from '../support/kube/api-server.js';
import {
  apply,
  eventually,
  expectStatus,
  FIXTURES_DIR,
  k8s,
  kubeConfigFor,
  merge,
  strategic,
} from '../support/kube/client.js';

const NS = 'builds';
const B = { group: 'kiln.dev', version: 'v1alpha1', namespace: NS, plural: 'builds' };
const spec = {
  tenantId: 't-1',
  projectId: 'p-1',
  method: 'kaniko',
};
const build = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'kiln.dev/v1alpha1',
  kind: 'Build',
  metadata: { name, ...extra },
  spec,
});
const job = (name: string, ownerUid?: string): k8s.V1Job => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: {
    name,
    ...(ownerUid
      ? {
          ownerReferences: [
            {
              apiVersion: 'kiln.dev/v1alpha1',
              kind: 'Build',
              name: 'owner',
              uid: ownerUid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        }
      : {}),
  },
  spec: {
    backoffLimit: 0,
    template: {
      spec: { restartPolicy: 'Never', containers: [{ name: 'build', image: 'busybox:1.36' }] },
    },
  },
});

describe(KubeApiServer.name, () => {
  let server: KubeApiServer;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;
  let leases: k8s.CoordinationV1Api;

  beforeAll(async () => {
    server = await KubeApiServer.start({
      crdDirectories: [FIXTURES_DIR],
      namespaces: ['default', NS],
    });
    const config = kubeConfigFor(server.url, NS);
    custom = config.makeApiClient(k8s.CustomObjectsApi);
    batch = config.makeApiClient(k8s.BatchV1Api);
    core = config.makeApiClient(k8s.CoreV1Api);
    leases = config.makeApiClient(k8s.CoordinationV1Api);
  });

  afterAll(async () => {
    await server.stop();
  });

  describe('create and read', () => {
    it('creates a Build with uid, creationTimestamp, generation 1, schema defaults and no status', async () => {
      const created = await custom.createNamespacedCustomObject({
        ...B,
        body: { ...build('create-1'), status: { message: 'ignored' } },
      });
      expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      expect(created.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(created.metadata.generation).toBe(1);
      expect(created.spec).toEqual({ ...spec, timeoutSeconds: 3600, suspend: false });
      expect(created.status).toBeUndefined();
      const read = await custom.getNamespacedCustomObject({ ...B, name: 'create-1' });
      expect(read).toEqual(created);
    });

    it('takes resourceVersions from one counter shared by every resource', async () => {
      const a = await custom.createNamespacedCustomObject({ ...B, body: build('rv-a') });
      const cm = await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: 'rv-b' } },
      });
      const c = await custom.createNamespacedCustomObject({ ...B, body: build('rv-c') });
      const rvs = [
        a.metadata.resourceVersion,
        cm.metadata?.resourceVersion,
        c.metadata.resourceVersion,
      ].map(Number);
      expect(rvs[1]).toBe((rvs[0] ?? 0) + 1);
      expect(rvs[2]).toBe((rvs[1] ?? 0) + 1);
    });

    it('names objects from generateName with five random characters', async () => {
      const created = await batch.createNamespacedJob({
        namespace: NS,
        body: { ...job(''), metadata: { generateName: 'kiln-' } },
      });
      expect(created.metadata?.name).toMatch(/^kiln-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    });

    it('answers AlreadyExists (409) for a second object with the same name', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('dup') });
      const status = await expectStatus(
        custom.createNamespacedCustomObject({ ...B, body: build('dup') }),
      );
      expect(status).toMatchObject({
        code: 409,
        reason: 'AlreadyExists',
        message: 'builds.kiln.dev "dup" already exists',
        details: { name: 'dup', group: 'kiln.dev', kind: 'builds' },
      });
    });

    it('answers NotFound (404) with the real message', async () => {
      const status = await expectStatus(custom.getNamespacedCustomObject({ ...B, name: 'nope' }));
      expect(status).toMatchObject({
        code: 404,
        reason: 'NotFound',
        message: 'builds.kiln.dev "nope" not found',
      });
      const job404 = await expectStatus(batch.readNamespacedJob({ namespace: NS, name: 'nope' }));
      expect(job404.message).toBe('jobs.batch "nope" not found');
    });

    it('refuses to create in a namespace that does not exist', async () => {
      const status = await expectStatus(
        custom.createNamespacedCustomObject({ ...B, namespace: 'missing', body: build('x') }),
      );
      expect(status).toMatchObject({
        code: 404,
        reason: 'NotFound',
        message: 'namespaces "missing" not found',
      });
    });

    it('applies built-in Job defaults and the controller-uid selector', async () => {
      const created = await batch.createNamespacedJob({ namespace: NS, body: job('defaults') });
      expect(created.spec).toMatchObject({
        parallelism: 1,
        completions: 1,
        backoffLimit: 0,
        suspend: false,
        completionMode: 'NonIndexed',
      });
      expect(created.spec?.selector?.matchLabels).toEqual({
        'batch.kubernetes.io/controller-uid': created.metadata?.uid,
      });
      expect(created.spec?.template.metadata?.labels?.['batch.kubernetes.io/job-name']).toBe(
        'defaults',
      );
      expect(created.spec?.template.spec?.containers[0]?.imagePullPolicy).toBe('IfNotPresent');
    });

    it('rejects a Job whose pods would restart, with the real field error', async () => {
      const body = job('always');
      body.spec!.template.spec!.restartPolicy = 'Always';
      const status = await expectStatus(batch.createNamespacedJob({ namespace: NS, body }));
      expect(status).toMatchObject({
        code: 422,
        reason: 'Invalid',
        message:
          'Job.batch "always" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
      });
    });
  });

  describe('CRD schema validation', () => {
    it('rejects an unsupported enum value with the real server wording and causes', async () => {
      const status = await expectStatus(
        custom.createNamespacedCustomObject({
          ...B,
          body: { ...build('b1'), spec: { ...spec, method: 'docker' } },
        }),
      );
      expect(status).toMatchObject({
        code: 422,
        reason: 'Invalid',
        message:
          'Build.kiln.dev "b1" is invalid: spec.method: Unsupported value: "docker": supported values: "kaniko", "buildx", "container", "paketo", "packer"',
        details: {
          name: 'b1',
          group: 'kiln.dev',
          kind: 'Build',
          causes: [
            {
              reason: 'FieldValueNotSupported',
              field: 'spec.method',
              message:
                'Unsupported value: "docker": supported values: "kaniko", "buildx", "container", "paketo", "packer"',
            },
          ],
        },
      });
    });

    it('lists every error in brackets: required fields, minimum and type', async () => {
      const status = await expectStatus(
        custom.createNamespacedCustomObject({
          ...B,
          body: { ...build('b2'), spec: { method: 'kaniko', timeoutSeconds: 0, suspend: 'yes' } },
        }),
      );
      expect(status.code).toBe(422);
      expect(status.message).toBe(
        'Build.kiln.dev "b2" is invalid: [spec.tenantId: Required value, spec.projectId: Required value, spec.timeoutSeconds: Invalid value: 0: spec.timeoutSeconds in body should be greater than or equal to 1, spec.suspend: Invalid value: "string": spec.suspend in body must be of type boolean: "string"]',
      );
    });

    it('prunes unknown fields but keeps the preserve-unknown-fields config', async () => {
      const created = await custom.createNamespacedCustomObject({
        ...B,
        body: {
          ...build('pruned'),
          spec: { ...spec, bogus: 1, config: { anything: { goes: true } } },
        },
      });
      expect(created.spec.bogus).toBeUndefined();
      expect(created.spec.config).toEqual({ anything: { goes: true } });
    });

    it('rejects unknown fields with fieldValidation=Strict, as kubectl asks', async () => {
      const response = await fetch(
        `${server.url}/apis/kiln.dev/v1alpha1/namespaces/${NS}/builds?fieldValidation=Strict`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...build('strict'), spec: { ...spec, bogus: 1 } }),
        },
      );
      expect(response.status).toBe(400);
      expect(((await response.json()) as { message: string }).message).toBe(
        'Build in version "v1alpha1" cannot be handled as a Build: strict decoding error: unknown field "spec.bogus"',
      );
    });

    it('rejects an invalid object name', async () => {
      const status = await expectStatus(
        custom.createNamespacedCustomObject({ ...B, body: build('Not_Valid') }),
      );
      expect(status.code).toBe(422);
      expect(status.message).toMatch(
        /^Build.kiln.dev "Not_Valid" is invalid: metadata.name: Invalid value: "Not_Valid": a lowercase RFC 1123 subdomain/,
      );
    });
  });

  describe('update', () => {
    it('answers Conflict (409) for a stale resourceVersion and accepts the current one', async () => {
      const created = await custom.createNamespacedCustomObject({ ...B, body: build('cas') });
      const first = { ...created, spec: { ...created.spec, suspend: true } };
      const updated = await custom.replaceNamespacedCustomObject({
        ...B,
        name: 'cas',
        body: first,
      });
      expect(Number(updated.metadata.resourceVersion)).toBeGreaterThan(
        Number(created.metadata.resourceVersion),
      );
      const stale = { ...created, spec: { ...created.spec, method: 'buildx' } };
      const status = await expectStatus(
        custom.replaceNamespacedCustomObject({ ...B, name: 'cas', body: stale }),
      );
      expect(status).toMatchObject({
        code: 409,
        reason: 'Conflict',
        message:
          'Operation cannot be fulfilled on builds.kiln.dev "cas": the object has been modified; please apply your changes to the latest version and try again',
      });
    });

    it('requires a resourceVersion to update a custom resource', async () => {
      const created = await custom.createNamespacedCustomObject({ ...B, body: build('no-rv') });
      const body = { ...created, metadata: { ...created.metadata, resourceVersion: undefined } };
      const status = await expectStatus(
        custom.replaceNamespacedCustomObject({ ...B, name: 'no-rv', body }),
      );
      expect(status.code).toBe(422);
      expect(status.message).toContain(
        'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
      );
    });

    it('bumps generation on spec changes only, and leaves status alone on the main endpoint', async () => {
      const created = await custom.createNamespacedCustomObject({ ...B, body: build('gen') });
      const labelled = await custom.patchNamespacedCustomObject(
        {
          ...B,
          name: 'gen',
          body: { metadata: { labels: { a: 'b' } }, status: { message: 'nope' } },
        },
        merge,
      );
      expect(labelled.metadata.generation).toBe(1);
      expect(labelled.status).toBeUndefined();
      expect(Number(labelled.metadata.resourceVersion)).toBeGreaterThan(
        Number(created.metadata.resourceVersion),
      );
      const changed = await custom.patchNamespacedCustomObject(
        { ...B, name: 'gen', body: { spec: { suspend: true } } },
        merge,
      );
      expect(changed.metadata.generation).toBe(2);
    });

    it('changes only status through /status, without bumping generation', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('st') });
      const patched = await custom.patchNamespacedCustomObjectStatus(
        {
          ...B,
          name: 'st',
          body: {
            spec: { method: 'buildx' },
            status: {
              buildNumber: 7,
              conditions: [{ type: 'Succeeded', status: 'Unknown', reason: 'Running' }],
            },
          },
        },
        merge,
      );
      expect(patched.status.buildNumber).toBe(7);
      expect(patched.spec.method).toBe('kaniko');
      expect(patched.metadata.generation).toBe(1);
    });

    it('validates status against the schema too', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('st-bad') });
      const status = await expectStatus(
        custom.patchNamespacedCustomObjectStatus(
          {
            ...B,
            name: 'st-bad',
            body: { status: { conditions: [{ type: 'Succeeded', status: 'Maybe' }] } },
          },
          merge,
        ),
      );
      expect(status.message).toContain('status.conditions[0].status: Unsupported value: "Maybe"');
    });

    it('does not bump the resourceVersion for a no-op update', async () => {
      const created = await custom.createNamespacedCustomObject({ ...B, body: build('noop') });
      const again = await custom.patchNamespacedCustomObject(
        { ...B, name: 'noop', body: { spec: { method: 'kaniko' } } },
        merge,
      );
      expect(again.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
    });

    it('creates a Lease with PUT (create-on-update) and then enforces its resourceVersion', async () => {
      const body = {
        metadata: { name: 'kiln-operator' },
        spec: { holderIdentity: 'a', leaseDurationSeconds: 15 },
      };
      const created = await leases.replaceNamespacedLease({
        namespace: NS,
        name: 'kiln-operator',
        body,
      });
      expect(created.spec?.holderIdentity).toBe('a');
      const status = await expectStatus(
        leases.replaceNamespacedLease({
          namespace: NS,
          name: 'kiln-operator',
          body: { ...body, metadata: { ...body.metadata, resourceVersion: '1' } },
        }),
      );
      expect(status.reason).toBe('Conflict');
    });
  });

  describe('patch', () => {
    it('applies a JSON patch (the client-node default) and fails a failing test op with 422', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('jp') });
      const patched = await custom.patchNamespacedCustomObject({
        ...B,
        name: 'jp',
        body: [{ op: 'replace', path: '/spec/method', value: 'paketo' }],
      });
      expect(patched.spec.method).toBe('paketo');
      const status = await expectStatus(
        custom.patchNamespacedCustomObject({
          ...B,
          name: 'jp',
          body: [{ op: 'test', path: '/spec/method', value: 'kaniko' }],
        }),
      );
      expect(status.code).toBe(422);
    });

    it('refuses a strategic merge patch on a custom resource with 415', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('smp') });
      const status = await expectStatus(
        custom.patchNamespacedCustomObject(
          { ...B, name: 'smp', body: { spec: { suspend: true } } },
          strategic,
        ),
      );
      expect(status).toMatchObject({ code: 415, reason: 'UnsupportedMediaType' });
    });

    it('merges containers and env by name in a strategic merge patch of a Job', async () => {
      const body = job('smp-job');
      body.spec!.template.spec!.containers = [
        {
          name: 'build',
          image: 'a:1',
          env: [
            { name: 'A', value: '1' },
            { name: 'B', value: '2' },
          ],
        },
        { name: 'side', image: 's:1' },
      ];
      body.spec!.suspend = true;
      await batch.createNamespacedJob({ namespace: NS, body });
      const patched = await batch.patchNamespacedJob(
        {
          namespace: NS,
          name: 'smp-job',
          body: {
            spec: {
              template: {
                spec: {
                  containers: [
                    {
                      name: 'build',
                      image: 'a:2',
                      env: [
                        { name: 'B', value: '3' },
                        { name: 'A', $patch: 'delete' },
                      ],
                    },
                  ],
                },
              },
            },
          },
        },
        strategic,
      );
      const containers = patched.spec?.template.spec?.containers ?? [];
      expect(containers.map((c) => [c.name, c.image])).toEqual([
        ['build', 'a:2'],
        ['side', 's:1'],
      ]);
      expect(containers[0]?.env).toEqual([{ name: 'B', value: '3' }]);
    });

    it('refuses a patch that carries a stale resourceVersion', async () => {
      const created = await custom.createNamespacedCustomObject({ ...B, body: build('patch-rv') });
      await custom.patchNamespacedCustomObject(
        { ...B, name: 'patch-rv', body: { spec: { suspend: true } } },
        merge,
      );
      const status = await expectStatus(
        custom.patchNamespacedCustomObject(
          {
            ...B,
            name: 'patch-rv',
            body: {
              metadata: { resourceVersion: created.metadata.resourceVersion },
              spec: { suspend: false },
            },
          },
          merge,
        ),
      );
      expect(status.reason).toBe('Conflict');
    });

    it('creates with server-side apply, then merges, removes dropped fields and records managers', async () => {
      const applied = {
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name: 'ssa', labels: { a: '1', b: '2' } },
        spec,
      };
      const created = await custom.patchNamespacedCustomObject(
        { ...B, name: 'ssa', fieldManager: 'kiln', body: applied },
        apply,
      );
      expect(created.metadata.labels).toEqual({ a: '1', b: '2' });
      await custom.patchNamespacedCustomObject(
        { ...B, name: 'ssa', body: { metadata: { labels: { c: '3' } } } },
        merge,
      );
      const reapplied = await custom.patchNamespacedCustomObject(
        {
          ...B,
          name: 'ssa',
          fieldManager: 'kiln',
          body: { ...applied, metadata: { name: 'ssa', labels: { a: '1' } } },
        },
        apply,
      );
      expect(reapplied.metadata.labels).toEqual({ a: '1', c: '3' });
      const managers = (
        reapplied.metadata.managedFields as { manager: string; operation: string }[]
      ).map((m) => `${m.manager}/${m.operation}`);
      expect(managers.sort()).toEqual(['kiln/Apply', 'kubernetes-client-javascript/Update']);
    });

    it("answers 409 to an apply that changes another manager's field, unless forced", async () => {
      const applied = {
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name: 'ssa-c' },
        spec,
      };
      await custom.patchNamespacedCustomObject(
        { ...B, name: 'ssa-c', fieldManager: 'one', body: applied },
        apply,
      );
      const other = { ...applied, spec: { ...spec, method: 'buildx' } };
      const status = await expectStatus(
        custom.patchNamespacedCustomObject(
          { ...B, name: 'ssa-c', fieldManager: 'two', body: other },
          apply,
        ),
      );
      expect(status).toMatchObject({ code: 409, reason: 'Conflict' });
      expect(status.message).toBe(
        'Apply failed with 1 conflict: conflict with "one": .spec.method',
      );
      const forced = await custom.patchNamespacedCustomObject(
        { ...B, name: 'ssa-c', fieldManager: 'two', force: true, body: other },
        apply,
      );
      expect(forced.spec.method).toBe('buildx');
    });
  });

  describe('delete', () => {
    it('keeps an object with finalizers, marked with deletionTimestamp, until they are removed', async () => {
      await custom.createNamespacedCustomObject({
        ...B,
        body: build('fin', { finalizers: ['kiln.dev/logs'] }),
      });
      const marked = await custom.deleteNamespacedCustomObject({ ...B, name: 'fin' });
      expect(marked.metadata.deletionTimestamp).toBeDefined();
      expect(marked.metadata.generation).toBe(2);
      const still = await custom.getNamespacedCustomObject({ ...B, name: 'fin' });
      expect(still.metadata.deletionTimestamp).toBe(marked.metadata.deletionTimestamp);
      const added = await expectStatus(
        custom.patchNamespacedCustomObject(
          { ...B, name: 'fin', body: { metadata: { finalizers: ['kiln.dev/logs', 'other'] } } },
          merge,
        ),
      );
      expect(added.message).toContain(
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted',
      );
      await custom.patchNamespacedCustomObject(
        { ...B, name: 'fin', body: { metadata: { finalizers: null } } },
        merge,
      );
      expect(
        (await expectStatus(custom.getNamespacedCustomObject({ ...B, name: 'fin' }))).code,
      ).toBe(404);
    });

    it('deletes dependents of a deleted owner in the background', async () => {
      const owner = await custom.createNamespacedCustomObject({ ...B, body: build('owner') });
      await batch.createNamespacedJob({
        namespace: NS,
        body: job('dependent', owner.metadata.uid),
      });
      await custom.deleteNamespacedCustomObject({ ...B, name: 'owner' });
      await eventually(() =>
        server.object('batch/v1', 'jobs', NS, 'dependent') ? undefined : true,
      );
    });

    it('orphans dependents with propagationPolicy=Orphan', async () => {
      const owner = await custom.createNamespacedCustomObject({ ...B, body: build('owner-o') });
      await batch.createNamespacedJob({ namespace: NS, body: job('orphan', owner.metadata.uid) });
      await custom.deleteNamespacedCustomObject({
        ...B,
        name: 'owner-o',
        propagationPolicy: 'Orphan',
      });
      await server.settled();
      const left = server.object('batch/v1', 'jobs', NS, 'orphan');
      expect(left?.metadata.ownerReferences).toBeUndefined();
    });

    it('deletes the owner after its dependents with propagationPolicy=Foreground', async () => {
      const owner = await custom.createNamespacedCustomObject({ ...B, body: build('owner-f') });
      await batch.createNamespacedJob({ namespace: NS, body: job('fg', owner.metadata.uid) });
      const marked = await custom.deleteNamespacedCustomObject({
        ...B,
        name: 'owner-f',
        propagationPolicy: 'Foreground',
      });
      expect(marked.metadata.finalizers).toEqual(['foregroundDeletion']);
      await eventually(() =>
        server.object('kiln.dev/v1alpha1', 'builds', NS, 'owner-f') ? undefined : true,
      );
      expect(server.object('batch/v1', 'jobs', NS, 'fg')).toBeUndefined();
    });

    it("orphans a Job's pods by default and says so in a Warning header, as batch/v1 does", async () => {
      const created = await batch.createNamespacedJob({ namespace: NS, body: job('job-orphan') });
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: {
            name: 'job-orphan-pod',
            ownerReferences: [
              {
                apiVersion: 'batch/v1',
                kind: 'Job',
                name: 'job-orphan',
                uid: created.metadata!.uid!,
                controller: true,
              },
            ],
          },
          spec: { restartPolicy: 'Never', containers: [{ name: 'build', image: 'busybox' }] },
        },
      });
      const response = await fetch(`${server.url}/apis/batch/v1/namespaces/${NS}/jobs/job-orphan`, {
        method: 'DELETE',
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('warning')).toContain(
        'child pods are preserved by default when jobs are deleted',
      );
      expect(await response.json()).toMatchObject({
        kind: 'Status',
        status: 'Success',
        details: { name: 'job-orphan', group: 'batch', kind: 'jobs' },
      });
      await server.settled();
      expect(
        server.object('v1', 'pods', NS, 'job-orphan-pod')?.metadata.ownerReferences,
      ).toBeUndefined();
    });

    it('terminates a namespace: refuses new content, deletes what is in it, then goes', async () => {
      await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
      await custom.createNamespacedCustomObject({
        ...B,
        namespace: 'doomed',
        body: build('held', { finalizers: ['kiln.dev/logs'] }),
      });
      const terminating = await core.deleteNamespace({ name: 'doomed' });
      expect((terminating as k8s.V1Namespace).status?.phase).toBe('Terminating');
      const refused = await expectStatus(
        custom.createNamespacedCustomObject({ ...B, namespace: 'doomed', body: build('late') }),
      );
      expect(refused).toMatchObject({ code: 403, reason: 'Forbidden' });
      expect(refused.message).toContain(
        'unable to create new content in namespace doomed because it is being terminated',
      );
      await server.settled();
      expect(
        server.object('kiln.dev/v1alpha1', 'builds', 'doomed', 'held')?.metadata.deletionTimestamp,
      ).toBeDefined();
      expect(server.object('v1', 'namespaces', undefined, 'doomed')).toBeDefined();
      await custom.patchNamespacedCustomObject(
        { ...B, namespace: 'doomed', name: 'held', body: { metadata: { finalizers: [] } } },
        merge,
      );
      await eventually(() =>
        server.object('v1', 'namespaces', undefined, 'doomed') ? undefined : true,
      );
    });

    it('honours a uid precondition', async () => {
      await custom.createNamespacedCustomObject({ ...B, body: build('pre') });
      const status = await expectStatus(
        custom.deleteNamespacedCustomObject({
          ...B,
          name: 'pre',
          body: { preconditions: { uid: 'other' } },
        }),
      );
      expect(status.reason).toBe('Conflict');
      expect(status.message).toContain('Precondition failed: UID in precondition: other');
    });
  });

  describe('list', () => {
    beforeAll(async () => {
      await core.createNamespace({ body: { metadata: { name: 'listing' } } });
      for (const [name, labels] of [
        ['l1', { tier: 'a', env: 'prod' }],
        ['l2', { tier: 'b', env: 'prod' }],
        ['l3', { tier: 'c' }],
        ['l4', { tier: 'a', env: 'dev' }],
        ['l5', {}],
      ] as const)
        await custom.createNamespacedCustomObject({
          ...B,
          namespace: 'listing',
          body: build(name, { labels }),
        });
    });

    const names = (list: { items: { metadata: { name: string } }[] }): string[] =>
      list.items.map((i) => i.metadata.name);
    const listing = { ...B, namespace: 'listing' };

    it.each([
      ['tier=a', ['l1', 'l4']],
      ['tier==a,env=prod', ['l1']],
      ['tier!=a', ['l2', 'l3', 'l5']],
      ['tier in (a,b)', ['l1', 'l2', 'l4']],
      ['tier notin (a,b)', ['l3', 'l5']],
      ['env', ['l1', 'l2', 'l4']],
      ['!env', ['l3', 'l5']],
    ])('selects by label selector %s', async (labelSelector, expected) => {
      expect(names(await custom.listNamespacedCustomObject({ ...listing, labelSelector }))).toEqual(
        expected,
      );
    });

    it('selects by metadata.name and metadata.namespace field selectors', async () => {
      expect(
        names(
          await custom.listNamespacedCustomObject({
            ...listing,
            fieldSelector: 'metadata.name=l3',
          }),
        ),
      ).toEqual(['l3']);
      expect(
        names(
          await custom.listNamespacedCustomObject({
            ...listing,
            fieldSelector: 'metadata.name!=l3',
          }),
        ),
      ).toHaveLength(4);
      const all = await custom.listClusterCustomObject({
        group: 'kiln.dev',
        version: 'v1alpha1',
        plural: 'builds',
        fieldSelector: 'metadata.namespace=listing',
      });
      expect(names(all)).toEqual(['l1', 'l2', 'l3', 'l4', 'l5']);
    });

    it('rejects an unsupported field selector with 400', async () => {
      const status = await expectStatus(
        custom.listNamespacedCustomObject({ ...listing, fieldSelector: 'spec.method=kaniko' }),
      );
      expect(status).toMatchObject({
        code: 400,
        reason: 'BadRequest',
        message: 'field label not supported: spec.method',
      });
    });

    it('pages with limit and continue as one consistent snapshot', async () => {
      const first = await custom.listNamespacedCustomObject({ ...listing, limit: 2 });
      expect(names(first)).toEqual(['l1', 'l2']);
      expect(first.metadata.remainingItemCount).toBe(3);
      await custom.createNamespacedCustomObject({ ...listing, body: build('l0') });
      await custom.deleteNamespacedCustomObject({ ...listing, name: 'l3' });
      const second = await custom.listNamespacedCustomObject({
        ...listing,
        limit: 2,
        _continue: first.metadata.continue,
      });
      expect(names(second)).toEqual(['l3', 'l4']);
      expect(second.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
      const third = await custom.listNamespacedCustomObject({
        ...listing,
        limit: 2,
        _continue: second.metadata.continue,
      });
      expect(names(third)).toEqual(['l5']);
      expect(third.metadata.continue).toBeUndefined();
    });

    it('answers 410 Gone to a continue token older than the history window', async () => {
      const first = await custom.listNamespacedCustomObject({ ...listing, limit: 1 });
      await custom.createNamespacedCustomObject({ ...listing, body: build('l9') });
      server.compact();
      const status = await expectStatus(
        custom.listNamespacedCustomObject({
          ...listing,
          limit: 1,
          _continue: first.metadata.continue,
        }),
      );
      expect(status).toMatchObject({ code: 410, reason: 'Expired' });
      expect(status.message).toMatch(/^The provided continue parameter is too old/);
    });

    it('omits kind and apiVersion on the items of a built-in list, as the real server does', async () => {
      const response = await fetch(`${server.url}/api/v1/namespaces`);
      const body = (await response.json()) as { kind: string; items: Record<string, unknown>[] };
      expect(body.kind).toBe('NamespaceList');
      expect(body.items[0]).not.toHaveProperty('kind');
    });
  });

  describe('pods/log', () => {
    it('serves stored lines with timestamps and tailLines, and a 400 for an unknown container', async () => {
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: 'logs' },
          spec: { containers: [{ name: 'build', image: 'busybox' }] },
        },
      });
      server.appendPodLog(
        NS,
        'logs',
        'build',
        ['one', 'two', 'three'],
        new Date('2026-01-01T00:00:00.5Z'),
      );
      const text = await core.readNamespacedPodLog({
        namespace: NS,
        name: 'logs',
        container: 'build',
        timestamps: true,
        tailLines: 2,
      });
      expect(text).toBe(
        '2026-01-01T00:00:00.500000000Z two\n2026-01-01T00:00:00.500000000Z three\n',
      );
      const status = await expectStatus(
        core.readNamespacedPodLog({ namespace: NS, name: 'logs', container: 'nope' }),
      );
      expect(status).toMatchObject({
        code: 400,
        message: 'container nope is not valid for pod logs',
      });
    });
  });

  describe('control API', () => {
    it('counts requests per path and answers injected failures', async () => {
      const path = `/apis/kiln.dev/v1alpha1/namespaces/${NS}/builds/create-1`;
      const before = server.requestCount(path);
      server.failNext(path, 500, { count: 2 });
      expect(
        (await expectStatus(custom.getNamespacedCustomObject({ ...B, name: 'create-1' }))).code,
      ).toBe(500);
      expect(
        (await expectStatus(custom.getNamespacedCustomObject({ ...B, name: 'create-1' }))).code,
      ).toBe(500);
      await expect(
        custom.getNamespacedCustomObject({ ...B, name: 'create-1' }),
      ).resolves.toMatchObject({ metadata: { name: 'create-1' } });
      expect(server.requestCount(path) - before).toBe(3);
    });

    it('seeds objects that clients then read, with an ADDED-worthy resourceVersion', async () => {
      const seeded = server.seed({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'seeded', namespace: NS },
        data: { a: 'Yg==' },
      });
      const read = await core.readNamespacedSecret({ namespace: NS, name: 'seeded' });
      expect(read.data).toEqual({ a: 'Yg==' });
      expect(read.metadata?.resourceVersion).toBe(seeded.metadata.resourceVersion);
    });
  });
});
