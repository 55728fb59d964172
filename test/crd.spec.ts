import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import {
  type BuildSpec,
  type SpecContext,
  specOfManifest,
  specOfReference,
} from '../src/manifest/build-spec.js';
import { validateManifest } from '../src/build-methods/manifest.js';
import type { MethodName } from '../src/manifest/types.js';
import {
  BUILD_API_VERSION,
  BUILD_SPEC_DEFAULTS,
  type BuildResource,
} from '../src/operator/api/build-resource.js';
import { buildResourceFor, buildSpecOf } from '../src/operator/api/projection.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { KUBECTL } from './support/kube/kubectl.js';

const CRD_FILE = 'crds/builds.kiln.dev.yaml';
const GENERATED = 'src/operator/api/build-resource.generated.ts';
const SAMPLES_DIR = 'config/samples';
const NAMESPACE = 'kiln-builds';
const TENANT = '5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11';
const PROJECT = '0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22';

interface Schema {
  type?: string;
  format?: string;
  enum?: unknown[];
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  maxLength?: number;
  maxItems?: number;
  maxProperties?: number;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule: string; message?: string }[];
}

interface Crd {
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: Record<string, unknown>;
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: Record<string, unknown>;
      additionalPrinterColumns: { name: string; type: string; jsonPath: string }[];
      schema: { openAPIV3Schema: Schema };
    }[];
  };
}

const crd = parse(readFileSync(CRD_FILE, 'utf8')) as Crd;
const schema = crd.spec.versions[0]!.schema.openAPIV3Schema;
const samples = readdirSync(SAMPLES_DIR)
  .filter((file) => file.endsWith('.yaml'))
  .sort()
  .map((file): [string, BuildResource] => [
    file,
    parse(readFileSync(join(SAMPLES_DIR, file), 'utf8')) as BuildResource,
  ]);

const run = (command: string, args: string[], env = process.env): Promise<Run> =>
  new Promise((resolve) => {
    execFile(command, args, { timeout: 30_000, env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

// The messages of the CRD's CEL rules, as the API server answers with them.
const KANIKO_RULE =
  'a kaniko build needs output.image or a tag that is a full image reference (registry/repository:tag)';
const BUILDX_RULE = 'config.platforms, cache_to, cache_from and secrets are only for buildx builds';
const RULES_NOT_CHECKED =
  'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation';

/** A Build with the required fields, plus whatever a case changes in its spec. */
function buildWith(name: string, spec: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: BUILD_API_VERSION,
    kind: 'Build',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      tenantId: TENANT,
      projectId: PROJECT,
      method: 'buildx',
      config: { dockerfile: 'FROM scratch\n' },
      ...spec,
    },
  };
}

/** What the API server stores for a spec: the CRD's defaults where the spec leaves them out. */
function withDefaults(spec: BuildResource['spec']): BuildResource['spec'] {
  const { source, ...defaults } = BUILD_SPEC_DEFAULTS;
  return {
    ...defaults,
    ...spec,
    ...(spec.source === undefined ? {} : { source: { ...source, ...spec.source } }),
  };
}

const context: SpecContext = {
  project: {
    name: 'web',
    gitRepositoryUrl: 'https://git.example.com/web.git',
    defaultRegistry: null,
  },
  defaultRegistry: 'harbor.example.com/team',
  timeoutSeconds: 1800,
};

function specOf(type: MethodName, config: object, extra: object = {}): BuildSpec {
  const result = validateManifest(
    {
      name: 'web',
      type,
      base_image: '',
      instructions: [],
      environment: { CI: 'true' },
      tags: ['1.0.0', 'quay.io/example/web:1.0.0'],
      build_config: {
        build_type: type,
        sbom_tool: 'syft',
        scan_tool: 'trivy',
        registry_type: 'harbor',
        secret_manager_type: 'vault',
        ...config,
      },
      ...extra,
    },
    { defaultRegistry: context.defaultRegistry },
  );
  if (!result.ok) throw new Error(`manifest refused: ${JSON.stringify(result.details)}`);
  return specOfManifest(result.manifest, context);
}

/** Specs as kiln's API stores them, one per method and a reference-form one. */
const SPECS: [string, BuildSpec][] = [
  ['kaniko', specOf('kaniko', { dockerfile: 'FROM alpine\n', target: 'run', cache: true })],
  [
    'buildx',
    specOf('buildx', {
      dockerfile: 'FROM alpine\n',
      platforms: ['linux/amd64', 'linux/arm64'],
      cache_from: ['type=registry,ref=quay.io/example/web:cache'],
    }),
  ],
  [
    'container',
    specOf('container', {}, { base_image: 'alpine:3.20', instructions: ['RUN apk add curl'] }),
  ],
  ['paketo', specOf('paketo', { paketo_config: { builder: 'paketobuildpacks/builder:base' } })],
  [
    'packer',
    specOf('packer', {
      packer_template: '{"builders":[{"type":"docker","image":"ubuntu:24.04"}]}',
      builders: [{ type: 'docker', image: 'ubuntu:24.04', changes: ['USER 1000'] }],
      variables: { region: 'eu', retries: 3 },
    }),
  ],
  [
    'reference',
    specOfReference({ branch: 'release/1.4', commit: '9fceb02d0ae5', buildArgs: null }, context),
  ],
];

/** A Build that breaks one CEL rule of crds/ when kubectl applies it. */
interface CelRefusal {
  /** The field the rule sits on and its message: which rule the case breaks. */
  path: string;
  message: string;
  name: string;
  /** For a transition rule (oldSelf), the Build applied first, which the rule lets through. */
  before?: Record<string, unknown>;
  spec: Record<string, unknown>;
  /** The schema type of the rule's node and the value it refuses: servers show one of them. */
  type: string;
  value?: unknown;
}

const CEL_REFUSALS: CelRefusal[] = [
  {
    path: 'spec',
    message: KANIKO_RULE,
    name: 'cel-kaniko',
    spec: { method: 'kaniko', output: { tags: ['v1'] } },
    type: 'object',
  },
  {
    path: 'spec',
    message: BUILDX_RULE,
    name: 'cel-buildx-only',
    spec: { method: 'container', config: { platforms: ['linux/amd64'] } },
    type: 'object',
  },
  {
    path: 'spec',
    message: 'cancelRequested cannot be withdrawn once true',
    name: 'cel-cancel',
    before: { cancelRequested: true },
    spec: { cancelRequested: false },
    type: 'object',
  },
  {
    path: 'spec.tenantId',
    message: 'tenantId is immutable',
    name: 'cel-tenant',
    before: {},
    spec: { tenantId: PROJECT },
    type: 'string',
    value: PROJECT,
  },
  {
    path: 'spec.projectId',
    message: 'projectId is immutable',
    name: 'cel-project',
    before: {},
    spec: { projectId: TENANT },
    type: 'string',
    value: TENANT,
  },
  {
    path: 'spec.method',
    message: 'method is immutable',
    name: 'cel-method',
    before: {},
    spec: { method: 'container' },
    type: 'string',
    value: 'container',
  },
];

/** Every x-kubernetes-validations rule of the CRDs in crds/, as `<field>: <message>`. */
function celRulesInCrds(): string[] {
  const rules: string[] = [];
  const walk = (node: Schema, path: string): void => {
    for (const { rule, message } of node['x-kubernetes-validations'] ?? [])
      rules.push(`${path || '<nil>'}: ${message?.trim() || `failed rule: ${rule.trim()}`}`);
    for (const [key, child] of Object.entries(node.properties ?? {}))
      walk(child, path ? `${path}.${key}` : key);
    if (node.items) walk(node.items, `${path}[*]`);
    if (typeof node.additionalProperties === 'object')
      walk(node.additionalProperties, `${path}[*]`);
  };
  for (const file of readdirSync('crds').filter((f) => /\.ya?ml$/.test(f)))
    for (const document of parseAllDocuments(readFileSync(join('crds', file), 'utf8')))
      for (const version of (document.toJS() as Crd).spec.versions)
        walk(version.schema.openAPIV3Schema, '');
  return rules;
}

describe(CRD_FILE, () => {
  it('every CEL rule in crds/ has a test that breaks it through kubectl', () => {
    expect(celRulesInCrds().sort()).toEqual(
      CEL_REFUSALS.map(({ path, message }) => `${path}: ${message}`).sort(),
    );
  });

  it('is what src/operator/api/build-resource.generated.ts was generated from', async () => {
    const generated = await run(process.execPath, ['scripts/gen-crd-types.cjs', '--stdout']);

    expect(generated.stderr).toBe('');
    expect(generated.stdout).toBe(readFileSync(GENERATED, 'utf8'));
  });

  it('defines the namespaced kind Build of kiln.dev/v1alpha1 with its names and status subresource', () => {
    expect(crd.metadata.name).toBe('builds.kiln.dev');
    expect(crd.spec).toMatchObject({
      group: 'kiln.dev',
      scope: 'Namespaced',
      names: {
        kind: 'Build',
        listKind: 'BuildList',
        plural: 'builds',
        singular: 'build',
        shortNames: ['kb'],
        categories: ['kiln'],
      },
    });
    expect(crd.spec.versions).toHaveLength(1);
    expect(crd.spec.versions[0]).toMatchObject({
      name: 'v1alpha1',
      served: true,
      storage: true,
      subresources: { status: {} },
    });
  });

  it('bounds every string, list and map it declares', () => {
    const unbounded: string[] = [];
    const walk = (node: Schema, path: string): void => {
      if (node['x-kubernetes-preserve-unknown-fields'] && !node.properties) {
        if (node.type === 'object' && node.maxProperties === undefined) unbounded.push(path);
        return;
      }
      if (node.type === 'string' && !node.enum && !node.format && node.maxLength === undefined)
        unbounded.push(path);
      if (node.type === 'array') {
        if (node.maxItems === undefined) unbounded.push(path);
        walk(node.items!, `${path}[]`);
      }
      if (typeof node.additionalProperties === 'object') {
        if (node.maxProperties === undefined) unbounded.push(path);
        walk(node.additionalProperties, `${path}.*`);
      }
      for (const [key, child] of Object.entries(node.properties ?? {}))
        walk(child, `${path}.${key}`);
    };
    walk(schema.properties!.spec!, 'spec');
    walk(schema.properties!.status!, 'status');

    expect(unbounded).toEqual([]);
  });

  it('has printer columns NUMBER, METHOD, STATUS, REASON, AGE over fields the schema declares', () => {
    const columns = crd.spec.versions[0]!.additionalPrinterColumns;
    const declared = (path: string): boolean =>
      path === '.metadata.creationTimestamp' ||
      path
        .split('.')
        .slice(1)
        .reduce<Schema | undefined>((node, key) => node?.properties?.[key], schema) !== undefined;

    expect(columns.map((c) => c.name.toUpperCase())).toEqual([
      'NUMBER',
      'METHOD',
      'STATUS',
      'REASON',
      'AGE',
    ]);
    expect(columns.filter((c) => !declared(c.jsonPath))).toEqual([]);
  });
});

describe('the Build CRD in the API server double, over HTTP', () => {
  let server: KubeApiServer;
  const collection = (): string =>
    `${server.url}/apis/kiln.dev/v1alpha1/namespaces/${NAMESPACE}/builds`;
  const request = async (
    method: string,
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: any }> => {
    const response = await fetch(url, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: await response.json() };
  };

  beforeAll(async () => {
    server = await KubeApiServer.start({
      crdDirectories: ['crds'],
      namespaces: ['default', NAMESPACE],
      kubelet: false,
      jobController: false,
    });
  });

  afterAll(async () => {
    await server.stop();
  });

  it.each(samples)(
    'stores the sample %s with the CRD defaults filled in',
    async (_file, sample) => {
      const created = await request('POST', collection(), sample);

      expect(created.status).toBe(201);
      expect(created.body.spec).toEqual(withDefaults(sample.spec));
    },
  );

  let invalidCount = 0;
  it.each(
    (
      [
        [
          'an unknown method',
          { method: 'gradle' },
          'spec.method',
          'Unsupported value: "gradle": supported values: "kaniko", "buildx", "container", "paketo", "packer"',
        ],
        [
          'a zero timeout',
          { timeoutSeconds: 0 },
          'spec.timeoutSeconds',
          'Invalid value: 0: spec.timeoutSeconds in body should be greater than or equal to 1',
        ],
        [
          'a timeout over a week',
          { timeoutSeconds: 604801 },
          'spec.timeoutSeconds',
          'should be less than or equal to 604800',
        ],
        [
          'a tenant id that is no UUID',
          { tenantId: 'acme' },
          'spec.tenantId',
          'Invalid value: "acme"',
        ],
        [
          'an upper-case project id',
          { projectId: PROJECT.toUpperCase() },
          'spec.projectId',
          'should match',
        ],
        ['an unknown form', { form: 'api' }, 'spec.form', 'Unsupported value: "api"'],
        [
          'a branch with a space',
          { source: { branch: 'my branch' } },
          'spec.source.branch',
          'should match',
        ],
        [
          'a commit that is no hash',
          { source: { commit: 'HEAD~1' } },
          'spec.source.commit',
          'should match',
        ],
        [
          'an empty context',
          { source: { context: '' } },
          'spec.source.context',
          'at least 1 chars long',
        ],
        [
          'a platform without an architecture',
          { config: { platforms: ['amd64'] } },
          'spec.config.platforms[0]',
          'should match',
        ],
        [
          'a cache flag that is a string',
          { config: { cache: 'yes' } },
          'spec.config.cache',
          'must be of type boolean',
        ],
        [
          'an output image with a tag',
          { output: { image: 'quay.io/example/web:1.0' } },
          'spec.output.image',
          'should match',
        ],
        [
          'a tag with a space',
          { output: { tags: ['v 1'] } },
          'spec.output.tags[0]',
          'should match',
        ],
        [
          'a tag with a digest',
          { output: { tags: ['quay.io/example/web@sha256:abc'] } },
          'spec.output.tags[0]',
          'should match',
        ],
        [
          'more than 64 tags',
          { output: { tags: Array.from({ length: 65 }, (_, i) => `v${i}`) } },
          'spec.output.tags',
          'Too many: 65: must have at most 64 items',
        ],
        [
          'an unknown registry',
          { output: { registry: 'ecr' } },
          'spec.output.registry',
          'Unsupported value: "ecr"',
        ],
        [
          'a credentials secret that is no DNS name',
          { output: { credentialsSecret: 'Harbor_Push' } },
          'spec.output.credentialsSecret',
          'should match',
        ],
        [
          'an unknown scanner',
          { scanTool: 'clamav' },
          'spec.scanTool',
          'Unsupported value: "clamav"',
        ],
        [
          'an environment value that is a number',
          { env: { A: 1 } },
          'spec.env.A',
          'must be of type string',
        ],
        [
          'a cancel reason over 1024 characters',
          { cancelReason: 'x'.repeat(1025) },
          'spec.cancelReason',
          'Too long: may not be longer than 1024',
        ],
      ] satisfies [string, Record<string, unknown>, string, string][]
    ).map(([name, change, field, detail]) => ({ name, change, field, detail })),
  )('rejects $name with 422 naming $field', async ({ change, field, detail }) => {
    // A distinct name each, so a case the schema wrongly accepts cannot fail the next ones.
    const name = `invalid-${++invalidCount}`;
    const rejected = await request('POST', collection(), buildWith(name, change));

    expect(rejected.status).toBe(422);
    expect(rejected.body).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422 });
    expect(rejected.body.details.causes).toContainEqual(
      expect.objectContaining({ field, message: expect.stringContaining(detail) }),
    );
    expect(server.object(BUILD_API_VERSION, 'builds', NAMESPACE, name)).toBeUndefined();
  });

  it('rejects a Build without its tenant, project and method, naming each', async () => {
    const rejected = await request('POST', collection(), {
      apiVersion: BUILD_API_VERSION,
      kind: 'Build',
      metadata: { name: 'empty' },
      spec: {},
    });

    expect(rejected.status).toBe(422);
    expect(rejected.body.details.causes).toEqual([
      { reason: 'FieldValueRequired', message: 'Required value', field: 'spec.tenantId' },
      { reason: 'FieldValueRequired', message: 'Required value', field: 'spec.projectId' },
      { reason: 'FieldValueRequired', message: 'Required value', field: 'spec.method' },
      // A missing field keeps the CEL rules from running, and the real server says so.
      {
        reason: 'FieldValueInvalid',
        message: `Invalid value: null: ${RULES_NOT_CHECKED}`,
        field: '<nil>',
      },
    ]);
  });

  it('refuses a Build breaking a CEL rule with the Status of the real server', async () => {
    const rejected = await request(
      'POST',
      collection(),
      buildWith('cel-status', { method: 'kaniko', output: { tags: ['v1'] } }),
    );

    expect(rejected).toEqual({
      status: 422,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `Build.kiln.dev "cel-status" is invalid: spec: Invalid value: "object": ${KANIKO_RULE}`,
        reason: 'Invalid',
        details: {
          name: 'cel-status',
          group: 'kiln.dev',
          kind: 'Build',
          causes: [
            {
              reason: 'FieldValueInvalid',
              message: `Invalid value: "object": ${KANIKO_RULE}`,
              field: 'spec',
            },
          ],
        },
        code: 422,
      },
    });
    expect(server.object(BUILD_API_VERSION, 'builds', NAMESPACE, 'cel-status')).toBeUndefined();
  });

  it('lists every broken rule in brackets, as for schema errors', async () => {
    const rejected = await request(
      'POST',
      collection(),
      buildWith('cel-two', {
        method: 'kaniko',
        config: { platforms: ['linux/amd64'] },
        output: { tags: ['v1'] },
      }),
    );

    expect(rejected.status).toBe(422);
    expect(rejected.body.message).toBe(
      `Build.kiln.dev "cel-two" is invalid: [spec: Invalid value: "object": ${KANIKO_RULE}, spec: Invalid value: "object": ${BUILDX_RULE}]`,
    );
  });

  it('runs the rules on a status update, whose spec is the stored one: no transition breaks', async () => {
    await request('POST', collection(), buildWith('cel-status-update', { cancelRequested: true }));

    const written = await request(
      'PATCH',
      `${collection()}/cel-status-update/status`,
      { spec: { cancelRequested: false }, status: { state: 'cancelled' } },
      { 'content-type': 'application/merge-patch+json' },
    );

    expect(written.status).toBe(200);
    expect(written.body.spec.cancelRequested).toBe(true);
    expect(written.body.status).toEqual({ state: 'cancelled' });
  });

  it.each(SPECS)(
    "stores the projection of a %s build unchanged and reads it back as kiln's spec",
    async (method, spec) => {
      const id = `0b6f2f7e-4c1a-4b7e-9a55-${Buffer.from(method).toString('hex').padEnd(12, '0').slice(0, 12)}`;
      const resource = buildResourceFor(
        { id, tenantId: TENANT, projectId: PROJECT, spec },
        NAMESPACE,
        {
          suspend: true,
          credentialsSecret: 'harbor-push',
        },
      );

      const created = await request('POST', collection(), resource);

      expect(created.status).toBe(201);
      expect(created.body.metadata.labels).toEqual(resource.metadata.labels);
      expect(created.body.spec).toEqual(resource.spec);
      expect(buildSpecOf(created.body as BuildResource)).toStrictEqual(spec);
    },
  );

  it('takes status through /status only, and prints it in the table kubectl asks for', async () => {
    await request('POST', collection(), buildWith('with-status', { method: 'paketo', config: {} }));
    const status = {
      buildId: '0b6f2f7e-4c1a-4b7e-9a55-3d2c1b0a9f8e',
      buildNumber: 12,
      state: 'failed',
      failureReason: 'OutOfMemory',
      conditions: [
        {
          type: 'Succeeded',
          status: 'False',
          reason: 'OutOfMemory',
          message: 'the builder was killed at its memory limit',
          lastTransitionTime: '2025-06-01T10:00:00Z',
        },
      ],
    };

    const ignored = await request(
      'PATCH',
      `${collection()}/with-status`,
      { status },
      {
        'content-type': 'application/merge-patch+json',
      },
    );
    const written = await request(
      'PATCH',
      `${collection()}/with-status/status`,
      { status },
      {
        'content-type': 'application/merge-patch+json',
      },
    );
    const table = await request('GET', collection(), undefined, {
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });

    expect(ignored.body.status).toBeUndefined();
    expect(written.status).toBe(200);
    expect(written.body.status).toEqual(status);
    expect(table.body.columnDefinitions.map((c: { name: string }) => c.name)).toEqual([
      'Name',
      'Number',
      'Method',
      'Status',
      'Reason',
      'Age',
    ]);
    const row = table.body.rows.find((r: { cells: unknown[] }) => r.cells[0] === 'with-status');
    expect(row.cells.slice(0, 5)).toEqual(['with-status', 12, 'paketo', 'failed', 'OutOfMemory']);
  });

  it('rejects a status outside the schema: an unknown state, a condition without its reason', async () => {
    await request('POST', collection(), buildWith('bad-status', {}));

    const rejected = await request(
      'PATCH',
      `${collection()}/bad-status/status`,
      {
        status: {
          state: 'done',
          conditions: [
            {
              type: 'Succeeded',
              status: 'True',
              message: '',
              lastTransitionTime: '2025-06-01T10:00:00Z',
            },
          ],
        },
      },
      { 'content-type': 'application/merge-patch+json' },
    );

    expect(rejected.status).toBe(422);
    expect(rejected.body.details.causes.map((c: { field: string }) => c.field).sort()).toEqual([
      '<nil>',
      'status.conditions[0].reason',
      'status.state',
    ]);
  });
});

// The project's kubectl (scripts/kube-tools.sh). With KUBECONFIG set this suite runs against that
// cluster instead of the double: it applies the CRD, creates the namespace, and deletes the
// Builds it made.
const realCluster = (process.env.KUBECONFIG ?? '') !== '';
if (realCluster)
  console.warn(`KUBECONFIG is set: the kubectl suite of the Build CRD runs against that cluster`);

describe(`the Build CRD with kubectl (${realCluster ? 'KUBECONFIG' : 'the double'})`, () => {
  let server: KubeApiServer | undefined;
  let dir: string;
  let kubeconfig: string;

  const kubectl = (...args: string[]): Promise<Run> =>
    run(
      KUBECTL,
      ['--kubeconfig', kubeconfig, '--request-timeout', '20s', '-n', NAMESPACE, ...args],
      // The double needs no credentials; a real cluster's auth plugins may need the user's HOME.
      realCluster ? process.env : { ...process.env, HOME: dir },
    );
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const made = ['bad-method', 'bad-timeout', ...CEL_REFUSALS.map((c) => c.name)];
  /** The server's minor version: how a field error shows its value changed with it. */
  let minor: number;
  /** `Invalid value: …: ` of a failed rule: the node's type up to 1.34, later its value. */
  const shown = ({ type, value }: CelRefusal): string =>
    minor < 35
      ? `Invalid value: "${type}": `
      : type === 'object' || type === 'array'
        ? 'Invalid value: '
        : `Invalid value: ${JSON.stringify(value)}: `;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-crd-'));
    if (realCluster) {
      kubeconfig = process.env.KUBECONFIG!;
      expect(await kubectl('apply', '-f', CRD_FILE)).toMatchObject({ code: 0 });
      expect(
        await kubectl(
          'wait',
          '--for',
          'condition=established',
          '--timeout=60s',
          'crd/builds.kiln.dev',
        ),
      ).toMatchObject({ code: 0 });
      await kubectl('create', 'namespace', NAMESPACE);
      await kubectl('delete', '-f', SAMPLES_DIR, '--ignore-not-found');
      await kubectl('delete', 'build', '--ignore-not-found', ...made);
    } else {
      server = await KubeApiServer.start({
        crdDirectories: ['crds'],
        namespaces: ['default', NAMESPACE],
        kubelet: false,
        jobController: false,
      });
      kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server.url, NAMESPACE);
    }
    const version = await kubectl('version', '-o', 'json');
    minor = Number.parseInt(
      (JSON.parse(version.stdout) as { serverVersion: { minor: string } }).serverVersion.minor,
      10,
    );
  }, 120_000);

  afterAll(async () => {
    if (realCluster) {
      await kubectl('delete', '-f', SAMPLES_DIR, '--ignore-not-found', '--wait=false');
      await kubectl('delete', 'build', '--ignore-not-found', '--wait=false', ...made);
    }
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('kubectl apply -f config/samples/ creates every sample', async () => {
    const applied = await kubectl('apply', '-f', `${SAMPLES_DIR}/`);

    expect(applied.stderr).toBe('');
    expect(applied.stdout.trim().split('\n').sort()).toEqual(
      samples.map(([, sample]) => `build.kiln.dev/${sample.metadata.name} created`).sort(),
    );
  });

  it('kubectl get kb prints NAME NUMBER METHOD STATUS REASON AGE', async () => {
    const patched = await kubectl(
      'patch',
      'build',
      'sample-kaniko',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { buildNumber: 7, state: 'failed', failureReason: 'TimedOut' } }),
    );
    const listed = await kubectl('get', 'kb');

    expect(patched).toMatchObject({ code: 0, stdout: 'build.kiln.dev/sample-kaniko patched\n' });
    expect(listed.code).toBe(0);
    const [header, ...rows] = listed.stdout
      .trim()
      .split('\n')
      .map((line) => line.split(/\s+/));
    expect(header).toEqual(['NAME', 'NUMBER', 'METHOD', 'STATUS', 'REASON', 'AGE']);
    expect(rows.find((row) => row[0] === 'sample-kaniko')?.slice(0, 5)).toEqual([
      'sample-kaniko',
      '7',
      'kaniko',
      'failed',
      'TimedOut',
    ]);
    expect(rows.map((row) => row[0]).sort()).toEqual(
      expect.arrayContaining(samples.map(([, sample]) => sample.metadata.name).sort()),
    );
  });

  it('rejects method: gradle with the schema message', async () => {
    const rejected = await kubectl(
      'apply',
      '-f',
      file('gradle.json', JSON.stringify(buildWith('bad-method', { method: 'gradle' }))),
    );

    expect(rejected.code).toBe(1);
    // An unsupported value keeps the CEL rules from running, which is a second error.
    expect(rejected.stderr.split('\n')).toEqual([
      'The Build "bad-method" is invalid: ',
      '* spec.method: Unsupported value: "gradle": supported values: "kaniko", "buildx", "container", "paketo", "packer"',
      `* <nil>: Invalid value: ${minor < 34 ? '"null"' : 'null'}: ${RULES_NOT_CHECKED}`,
      '',
    ]);
  });

  it('rejects timeoutSeconds: 0 with the schema message', async () => {
    const rejected = await kubectl(
      'apply',
      '-f',
      file('timeout.json', JSON.stringify(buildWith('bad-timeout', { timeoutSeconds: 0 }))),
    );

    expect(rejected.code).toBe(1);
    expect(rejected.stderr).toContain(
      'spec.timeoutSeconds: Invalid value: 0: spec.timeoutSeconds in body should be greater than or equal to 1',
    );
  });

  it('kubectl explain build.spec describes the fields from the schema', async () => {
    const explained = await kubectl('explain', 'build.spec');

    expect(explained).toMatchObject({ code: 0 });
    expect(explained.stdout).toContain('GROUP:      kiln.dev');
    expect(explained.stdout).toMatch(/timeoutSeconds\s+<integer>/);
    expect(explained.stdout).toMatch(/tenantId\s+<string> -required-/);
  });

  it.each(CEL_REFUSALS)(
    'refuses $name, which breaks the rule on $path: $message',
    async (refusal) => {
      const { name, before, spec, path, message } = refusal;
      if (before) {
        const first = file(`${name}-before.json`, JSON.stringify(buildWith(name, before)));
        expect(await kubectl('apply', '-f', first)).toMatchObject({ code: 0 });
      }

      const rejected = await kubectl(
        'apply',
        '-f',
        file(`${name}.json`, JSON.stringify(buildWith(name, spec))),
      );

      expect(rejected.code).toBe(1);
      expect(rejected.stderr).toBe(
        `The Build "${name}" is invalid: ${path}: ${shown(refusal)}${message}\n`,
      );
    },
  );
});
