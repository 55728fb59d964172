import type { V1Job, V1Pod, V1Secret } from '@kubernetes/client-node';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { KANIKO_IMAGE } from '../../src/build-methods/images.js';
import { STATUS_CHANNEL } from '../../src/database/channels.js';
import { LOGS_FINALIZER } from '../../src/operator/builds/build-reconciler.js';
import { BuildOperator } from '../../src/operator/build-operator.js';
import type { OperatorRuntime } from '../../src/operator/runtime/operator-runtime.js';
import { type Seeded, seedTenancy, tokenFor } from './auth.js';
import { ApiClient, wizardManifest } from './builds.js';
import type { CredentialAudit } from './credential-audit.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { jsonOf } from './http.js';
import { databaseText } from './leaks.js';
import { KubeApiServer, type KubeApiServerOptions } from './kube/api-server.js';
import { writeKubeconfig } from './kube/kubeconfig.js';
import { type ContainerScript, numberedLine, verifyCrc } from './kube/kubelet.js';
import { TcpProxy } from './tcp-proxy.js';
import { startTestApp, type TestApp } from './test-app.js';

export const NS = 'kiln-builds';
export const BUILDS = ['kiln.dev/v1alpha1', 'builds'] as const;
export const BUILDS_PATH = `/apis/kiln.dev/v1alpha1/namespaces/${NS}/builds`;
export const COLLECTIONS = {
  builds: BUILDS_PATH,
  jobs: `/apis/batch/v1/namespaces/${NS}/jobs`,
  pods: `/api/v1/namespaces/${NS}/pods`,
} as const;
/** OP-02, OP-12: the plan's bound on the reconciles of one build. */
export const MAX_RECONCILES = 20;

export const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
export const numbered = (n: number) => Array.from({ length: n }, (_, i) => numberedLine(i + 1, n));

/** Polls `probe` until it answers something other than undefined or false. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 20_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

export interface StoredLine {
  message: string;
  level: string;
  metadata: Record<string, string> | null;
}

export type BuildRecord = Record<string, any>;

/**
 * The ground of the operator's fault suites: the Kubernetes API server double over HTTP, one
 * Postgres database, an API-only kiln (KILN_ROLE=api, KILN_RUNNER=kubernetes) with a seeded
 * tenancy, and as many operator-only kilns (KILN_ROLE=operator) as a test starts, as separate
 * replicas would be. `reset()` (afterEach) closes what a test opened; `close()` (afterAll) the
 * rest.
 */
export class OperatorGround {
  private readonly operators = new Set<TestApp>();
  /** What a test opened besides operators (listeners, proxies): closed even when it fails. */
  private readonly opened: Array<() => Promise<void>> = [];
  /** Builds made by startedBuild, numbering their tags. */
  private builds = 0;
  /** What operators wrote to their logs before they were closed. */
  private readonly closedOperatorLogs: string[] = [];

  private constructor(
    readonly cluster: KubeApiServer,
    readonly dir: string,
    readonly kubeconfig: string,
    readonly database: TestDatabase,
    readonly api: TestApp,
    readonly seeded: Seeded,
    readonly admin: ApiClient,
  ) {}

  /**
   * `apiEnv` adds to the API's environment (a small KILN_ARTIFACT_MAX_BYTES, say); the operators
   * have their own (`startOperator`).
   */
  static async start(
    name: string,
    options: { apiEnv?: Record<string, string>; cluster?: Partial<KubeApiServerOptions> } = {},
  ): Promise<OperatorGround> {
    const cluster = await KubeApiServer.start({
      crdDirectories: ['crds'],
      namespaces: ['default', NS],
      ...options.cluster,
    });
    const dir = mkdtempSync(join(tmpdir(), `kiln-${name}-`));
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, NS);
    const database = await createTestDatabase();
    const api = await startTestApp({
      database,
      env: {
        ...options.apiEnv,
        KILN_ROLE: 'api',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: kubeconfig,
      },
    });
    const seeded = await seedTenancy(api);
    const admin = new ApiClient(
      api,
      await tokenFor(api.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    return new OperatorGround(cluster, dir, kubeconfig, database, api, seeded, admin);
  }

  /** afterEach: the API server back online, every operator, proxy and listener closed. */
  async reset(): Promise<void> {
    if (this.cluster.isOffline) await this.cluster.goOnline();
    for (const operator of this.operators) await this.stopOperator(operator);
    for (const close of this.opened.splice(0)) await close();
    this.cluster.kubelet.clearScripts();
  }

  async close(): Promise<void> {
    await this.reset();
    await this.api.close();
    await this.cluster.stop();
    await this.database.drop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs `close` at the next reset (after the operators are closed). */
  onReset(close: () => Promise<void>): void {
    this.opened.push(close);
  }

  // ---- operators ----------------------------------------------------------------------------

  /**
   * An operator-only kiln on the shared database, or reaching Postgres or the API server through
   * a proxy (`databaseUrl`, `apiServer`) that can cut it off.
   */
  async startOperator(
    through: { databaseUrl?: string; apiServer?: TcpProxy; env?: Record<string, string> } = {},
  ): Promise<TestApp> {
    const { databaseUrl, apiServer, env = {} } = through;
    const operator = await startTestApp({
      database:
        databaseUrl === undefined
          ? this.database
          : { url: databaseUrl, drop: () => Promise.resolve() },
      env: {
        KILN_ROLE: 'operator',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: apiServer === undefined ? this.kubeconfig : this.kubeconfigThrough(apiServer),
        KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '5',
        ...env,
      },
    });
    this.operators.add(operator);
    return operator;
  }

  async stopOperator(operator: TestApp): Promise<void> {
    this.operators.delete(operator);
    await operator.close();
    this.closedOperatorLogs.push(...operator.logs.raw);
  }

  /**
   * Shows `audit` what this ground's kiln showed anyone: the API's responses, every line kiln
   * logged, the Events and Build statuses it wrote (not the build Secrets, which hold the values
   * by design), and its database.
   */
  async showTo(audit: CredentialAudit): Promise<void> {
    audit.kilnOrigin(this.api.baseUrl);
    audit.record("kiln's own log", this.kilnLogLines().join('\n'));
    audit.record('Events', JSON.stringify(this.cluster.objects('v1', 'events', NS)));
    audit.record(
      'Build statuses',
      JSON.stringify(
        this.cluster.objects('kiln.dev/v1alpha1', 'builds', NS).map((build) => build.status),
      ),
    );
    await audit.recordDatabase(this.api.dataSource);
  }

  /** Every line kiln logged in this ground: the API's and every operator's, closed ones too. */
  kilnLogLines(): string[] {
    return [
      ...this.api.logs.raw,
      ...this.closedOperatorLogs,
      ...[...this.operators].flatMap((operator) => operator.logs.raw),
    ];
  }

  /** A kubeconfig that reaches the API server through `proxy`. */
  kubeconfigThrough(proxy: TcpProxy): string {
    return writeKubeconfig(
      join(this.dir, `kubeconfig-${proxy.port}`),
      proxy.proxied(this.cluster.url),
      NS,
    );
  }

  runtimeOf(operator: TestApp): OperatorRuntime {
    const runtime = operator.app.get(BuildOperator).operatorRuntime;
    if (runtime === undefined) throw new Error('the operator is not running');
    return runtime;
  }

  /** A TCP proxy in front of the test database or the API server, to cut an operator off. */
  async proxyTo(url: string): Promise<TcpProxy> {
    const real = new URL(url);
    const proxy = await TcpProxy.start({ host: real.hostname, port: Number(real.port) });
    // After the operators (reset closes them first): they may still talk through it.
    this.onReset(() => proxy.stop());
    return proxy;
  }

  // ---- the cluster --------------------------------------------------------------------------

  /** Scripts the kaniko builder's container (every build of these suites is a kaniko build). */
  builder(script: ContainerScript): void {
    this.cluster.kubelet.script(KANIKO_IMAGE, script);
  }

  resource(name: string): Record<string, any> | undefined {
    return this.cluster.objects(...BUILDS, NS).find((b) => b.metadata.name === name) as
      Record<string, any> | undefined;
  }

  /** The build's own Secret (`kiln-<id>`): upload tokens, resolved secret references. */
  buildSecret(id: string): V1Secret | undefined {
    return this.cluster.object('v1', 'secrets', NS, `kiln-${id}`) as V1Secret | undefined;
  }

  /** Every Build, Job, pod, ConfigMap, Event and Secret but the build's own, as text. */
  clusterTextBesides(id: string): string {
    return [
      ...this.cluster.objects(...BUILDS, NS),
      ...this.cluster.objects('batch/v1', 'jobs', NS),
      ...this.cluster.objects('v1', 'pods', NS),
      ...this.cluster.objects('v1', 'configmaps', NS),
      ...this.cluster.objects('v1', 'events', NS),
      ...this.cluster.objects('v1', 'secrets', NS).filter((s) => s.metadata.name !== `kiln-${id}`),
    ]
      .map((object) => JSON.stringify(object))
      .join('\n');
  }

  /** Every row of every table of kiln's database, as text (leaks.ts). */
  databaseText(): Promise<string> {
    return databaseText(this.api.dataSource);
  }

  jobOf(id: string): V1Job | undefined {
    return (this.cluster.objects('batch/v1', 'jobs', NS) as V1Job[]).find(
      (j) => j.metadata?.name === `kiln-${id}`,
    );
  }

  podOf(id: string): V1Pod | undefined {
    return (this.cluster.objects('v1', 'pods', NS) as V1Pod[]).find(
      (p) => p.metadata?.labels?.['job-name'] === `kiln-${id}`,
    );
  }

  /** Jobs the operator created for the build (its JobCreated Events: one per successful create). */
  jobsCreated(id: string): number {
    return this.cluster
      .objects('v1', 'events', NS)
      .filter((e: any) => e.involvedObject?.name === id && e.reason === 'JobCreated').length;
  }

  // ---- builds -------------------------------------------------------------------------------

  async record(id: string): Promise<BuildRecord> {
    return jsonOf(await this.admin.request('GET', `/builds/${id}`));
  }

  /** GET /builds/{id}/status through the API. */
  async status(id: string): Promise<BuildRecord> {
    return jsonOf(await this.admin.request('GET', `/builds/${id}/status`));
  }

  /** The build's `queue` (GET …/status) once it says the build waits for `reason`. */
  async waitingFor(id: string, reason: string): Promise<Record<string, any>> {
    return until(`build ${id} to wait for ${reason}`, async () => {
      const { queue } = await this.status(id);
      return queue?.reason === reason ? queue : undefined;
    });
  }

  /** The `[kiln]` lines of the build's stored log, in order. */
  async kilnLines(id: string): Promise<string[]> {
    return (await this.storedLines(id))
      .map((line) => line.message)
      .filter((message) => message.includes('[kiln]'));
  }

  async ended(id: string, ms?: number): Promise<BuildRecord> {
    return until(
      `build ${id} to end`,
      async () => {
        const build = await this.record(id);
        return ['success', 'failed', 'cancelled'].includes(build.status) ? build : undefined;
      },
      ms,
    );
  }

  /** A wizard build of tenant A's project, created and started through the API. */
  async startedWizard(manifest: Record<string, unknown>): Promise<string> {
    const created = await this.admin.request('POST', '/builds', {
      tenant_id: this.seeded.tenantA,
      project_id: this.seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await this.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  /** The build once it ended `failed` with `reason` (the column the API does not show). */
  async failedWith(id: string, reason: string): Promise<BuildRecord> {
    const build = await this.ended(id);
    expect({ status: build.status, reason: await this.column(id, 'failure_reason') }).toEqual({
      status: 'failed',
      reason,
    });
    return build;
  }

  /**
   * A kaniko build created and started through the API (a Build resource, unsuspended); each one
   * pushes a tag of its own, so none is a duplicate of another still running.
   */
  async startedBuild(): Promise<string> {
    const manifest = wizardManifest('kaniko');
    manifest['tags'] = `latest, v1, build-${(this.builds += 1)}`;
    const created = await this.admin.request('POST', '/builds', {
      tenant_id: this.seeded.tenantA,
      project_id: this.seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await this.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  /** A column of the build's row the API does not show. */
  async column(id: string, name: 'cancel_reason' | 'failure_reason'): Promise<unknown> {
    const [row] = await this.api.dataSource.query(
      `SELECT ${name} AS value FROM builds WHERE id = $1`,
      [id],
    );
    return row?.value;
  }

  async storedLines(id: string): Promise<StoredLine[]> {
    return this.api.dataSource.query(
      'SELECT message, level, metadata FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
  }

  async linesStored(id: string, n: number): Promise<void> {
    await until(
      `${n} lines of ${id}`,
      async () => builderLines(await this.storedLines(id)).length >= n,
    );
  }

  /** Every printed line stored once, in order, and the builder's own CRC over them matches. */
  async expectCompleteLog(id: string, n: number): Promise<void> {
    const lines = builderLines(await this.storedLines(id));
    expect(lines.slice(0, -1)).toEqual(numbered(n));
    expect(verifyCrc(lines)).toBe(true);
  }

  /** The Build resource mirrors the record and has let go of its finalizer. */
  async expectMirrored(id: string, state: string): Promise<void> {
    await until(`the Build ${id} to mirror ${state}`, () => {
      const resource = this.resource(id);
      return resource?.status?.state === state &&
        resource.metadata.finalizers?.includes(LOGS_FINALIZER) !== true
        ? true
        : undefined;
    });
  }

  /** Every status change Postgres announces (`<build id>:<status>`), from now on. */
  async statusChanges(): Promise<{ of(id: string): string[] }> {
    const client = new pg.Client({ connectionString: this.database.url });
    await client.connect();
    this.onReset(() => client.end());
    const seen: string[] = [];
    client.on('notification', (n) => seen.push(n.payload ?? ''));
    await client.query(`LISTEN ${STATUS_CHANNEL}`);
    return {
      of: (id) => seen.filter((p) => p.startsWith(`${id}:`)).map((p) => p.slice(id.length + 1)),
    };
  }
}

/** The lines the builder container printed, in stored order. */
export const builderLines = (lines: StoredLine[]): string[] =>
  lines.filter((l) => l.metadata?.['container'] === 'build').map((l) => l.message);
