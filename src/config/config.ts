import { homedir } from 'node:os';
import { readAccessCache, readAuth, readLogin } from './auth.js';
import { readBuildLimits, readBuildListing } from './builds.js';
import { readDatabase } from './database.js';
import { type AdmissionSettings, readAdmission } from './admission.js';
import { readExternalCalls } from './external-calls.js';
import { type JwtSecretSource, readKeys } from './keys.js';
import { type KubeLocation, kubeLocation } from './kube.js';
import { readLogs } from './logs.js';
import { type OperationsSettings, readOperations } from './operations.js';
import { readTriggers, type TriggerSettings } from './triggers.js';
import { type BuildNamespaces, type OperatorRuntimeSettings, readOperator } from './operator.js';
import { readRateLimits } from './rate-limits.js';
import { type Env, EnvReader } from './reader.js';
import { readLocalRunner, readRole, readRunner, type Role, type RunnerKind } from './runner.js';
import { type LogLevel, readServer } from './server.js';
import type { OperatorSteps } from './steps.js';
import { readWebSockets } from './web-sockets.js';

export { MIN_PASSWORD_LENGTH } from './auth.js';
export { DEFAULT_LIST_EXACT_COUNT_LIMIT } from './builds.js';
export type { JwtSecretSource } from './keys.js';
export { type KubeLocation, kubeLocation } from './kube.js';
export type { BuildNamespaces, OperatorRuntimeSettings } from './operator.js';
export type { OperationsSettings } from './operations.js';
export type { TriggerSettings } from './triggers.js';
export { ConfigError, type Env } from './reader.js';
export { ROLES, type Role, RUNNERS, type RunnerKind } from './runner.js';
export { LOG_LEVELS, type LogLevel } from './server.js';
export { type OperatorSteps, STEP_TOOL_NAMES, type StepToolName } from './steps.js';

/**
 * The validated configuration. It is the DI token too: inject `KilnConfig` anywhere.
 * Built only by `loadConfig`, which is the one place that reads process.env.
 */
export class KilnConfig {
  readonly role!: Role;
  readonly runner!: RunnerKind;
  /** Where the Kubernetes API server is: a kubeconfig file, the pod's service account, or none. */
  readonly kube!: KubeLocation;
  /**
   * Namespaces of Build resources and their Jobs, by the Pod Security level of the build's method
   * (KILN_BUILD_NAMESPACE, KILN_BUILD_NAMESPACE_<LEVEL>, KILN_BUILD_ALLOW_PRIVILEGED). One name for
   * every level is one build namespace, as before levels had their own.
   */
  readonly buildNamespaces!: BuildNamespaces;
  /**
   * Operator: build pods run in a user namespace (`hostUsers: false`) wherever their method can
   * (KILN_BUILD_USER_NAMESPACES; Kubernetes 1.33+ with user namespaces enabled on its nodes).
   */
  readonly buildUserNamespaces!: boolean;
  /** Operator: how long an ended build waits for its pod's log streams before a marker line. */
  readonly operatorDrainDeadlineMs!: number;
  /** Operator: how long a builder image may fail to pull before ImagePullFailed. */
  readonly operatorImagePullTimeoutMs!: number;
  /**
   * How long a build's pod may stay unschedulable (no node fits it) before the build fails with
   * Unschedulable (KILN_OPERATOR_UNSCHEDULABLE_SECONDS, default 15 min).
   */
  readonly operatorUnschedulableMs!: number;
  /** Operator: ttlSecondsAfterFinished set on a build's Job once its logs are stored. */
  readonly operatorJobTtlSeconds!: number;
  /**
   * Operator: the steps after the image (SBOM, scan). Without KILN_STEP_IMAGE (kiln's own image,
   * pinned by digest) or KILN_UPLOAD_URL (kiln's API as build pods reach it) there are none, and
   * each build's log says so.
   */
  readonly operatorSteps!: OperatorSteps;
  /** Operator: leader election, watches and workers (KILN_OPERATOR_LEASE_*, _WATCH_*, ...). */
  readonly operatorRuntime!: OperatorRuntimeSettings;
  /**
   * Calls to secret managers and registries when a build starts: per attempt
   * (KILN_EXTERNAL_TIMEOUT_MS) and attempts in all (KILN_EXTERNAL_ATTEMPTS).
   */
  readonly externalCalls!: { readonly timeoutMs: number; readonly attempts: number };
  /** Limits on running and waiting builds (docs/adr/0042-admission-in-postgres.md). */
  readonly admission!: AdmissionSettings;
  readonly host!: string;
  readonly port!: number;
  /** Unset: kiln runs an embedded PostgreSQL under dataDir. */
  readonly databaseUrl!: string | undefined;
  readonly dataDir!: string;
  readonly jwtSecret!: JwtSecretSource;
  /** The key build secrets are sealed with in the database (KILN_SECRETS_KEY(_FILE)). */
  readonly secretsKey!: JwtSecretSource;
  readonly jwtTtlSeconds!: number;
  readonly jwtIssuer!: string;
  readonly jwtAudience!: string;
  /** First start with an empty database creates this admin (with a default tenant and project). */
  readonly bootstrapAdmin!: { email: string; password: string } | undefined;
  readonly loginMaxFailures!: number;
  /** The longest an API token may live, in days (KILN_API_TOKEN_MAX_DAYS). */
  readonly apiTokenMaxDays!: number;
  /** Requests per window and caller: reads (GET) and writes (everything else); 0 turns a class off. */
  readonly rateLimitReads!: number;
  readonly rateLimitWrites!: number;
  readonly rateLimitWindowSeconds!: number;
  /**
   * How often each API replica writes the requests it counted and reads back every replica's
   * totals (KILN_RATE_LIMIT_FLUSH_MS): the bound on how far replicas together overshoot a limit.
   */
  readonly rateLimitFlushMs!: number;
  /** Callers one replica counts in memory per window; callers past it cost one upsert a request. */
  readonly rateLimitMaxKeys!: number;
  /**
   * How long a user's access to a tenant (enabled, member, role) is reused without a query
   * (KILN_ACCESS_CACHE_TTL_MS; 0 reads it on every request): the bound on its staleness when a
   * change notification is lost (docs/adr/0025-hot-path-round-trips.md).
   */
  readonly accessCacheTtlMs!: number;
  readonly loginWindowSeconds!: number;
  /** Largest build log kiln stores; past it a marker line says the rest was dropped. */
  readonly logMaxBytesPerBuild!: number;
  /**
   * A deleted build's lines are removed in the background, this many per transaction
   * (KILN_LOG_PURGE_BATCH_LINES), so no delete holds the disk or the WAL for long
   * (docs/adr/0027-log-purge.md).
   */
  readonly logPurgeBatchLines!: number;
  /** Least pause between two purge batches; a batch that took longer waits as long as it took. */
  readonly logPurgePauseMs!: number;
  /** How often each process looks for deleted builds whose lines are still to purge. */
  readonly logPurgePollMs!: number;
  /**
   * GET /builds counts matching builds exactly up to this many; past it total_count is the
   * planner's estimate (docs/adr/0023-list-counts-and-build-numbers.md).
   */
  readonly listExactCountLimit!: number;
  /**
   * Browser origins allowed to open the log WebSocket besides kiln's own (the Origin whose
   * host:port is the request's Host, scheme as the client reached kiln), which is always allowed.
   * Any other Origin is refused; non-browser clients send none and pass.
   */
  readonly wsAllowedOrigins!: readonly string[];
  readonly wsMaxConnectionsPerUser!: number;
  /** Ping period; a client that misses a pong for a whole period is dropped. */
  readonly wsHeartbeatMs!: number;
  /** How long a client may leave the send buffer over its high-water mark before it is closed. */
  readonly wsStallMs!: number;
  /** Streams re-read Postgres this often even without a notification (one may have been lost). */
  readonly wsPollMs!: number;
  /** Local runner: builds running at once; more wait for a slot. */
  readonly localMaxParallel!: number;
  /** Local runner: `host[:port][/prefix]` that bare tags are pushed under; unset: images stay local. */
  readonly localRegistry!: string | undefined;
  /** Local runner: registries pushed to over plain HTTP / without TLS verification. */
  readonly localInsecureRegistries!: readonly string[];
  /** Local runner: containers auth file (auth.json) with registry credentials. */
  readonly localAuthFile!: string | undefined;
  /**
   * Local runner: the bytes all project layer caches may hold together; least recently used
   * caches are evicted past it (docs/adr/0055-local-layer-cache.md). 0: no layer cache.
   */
  readonly localCacheMaxBytes!: number;
  /** Grace between SIGTERM and SIGKILL when a build is cancelled. */
  readonly cancelGraceMs!: number;
  /**
   * Local runner: the only variables of kiln's environment its child processes (git, buildah,
   * pack, packer) inherit, so kiln's own secrets never reach a build. Taken from the environment
   * when set: PATH (default: the system path), HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TMPDIR,
   * TZ; the proxy variables HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY (either case); TLS trust:
   * SSL_CERT_FILE, SSL_CERT_DIR, GIT_SSL_CAINFO, GIT_SSL_CAPATH; buildah: REGISTRY_AUTH_FILE,
   * CONTAINERS_*, XDG_RUNTIME_DIR, XDG_CONFIG_HOME; pack: DOCKER_HOST, DOCKER_CONFIG,
   * DOCKER_CERT_PATH, DOCKER_TLS_VERIFY, PACK_HOME; packer: PACKER_*, CHECKPOINT_DISABLE.
   * A name starting with KILN_ or PG, or DATABASE_URL, is never taken, whatever the list says.
   */
  readonly childEnvironment!: Readonly<Record<string, string>>;
  readonly logLevel!: LogLevel;
  readonly maxBodyBytes!: number;
  /** Reverse proxies in front of kiln whose X-Forwarded-For is trusted for the client address. */
  readonly trustProxyHops!: number;
  readonly shutdownTimeoutMs!: number;
  /** How long a build may run before it fails with TimedOut (captured in its spec at create). */
  readonly buildTimeoutSeconds!: number;
  /**
   * Largest SBOM or scan report kiln keeps per build (KILN_ARTIFACT_MAX_BYTES, before
   * compression). A larger SBOM is stored truncated with a note; a larger scan report is refused.
   */
  readonly artifactMaxBytes!: number;
  /** /metrics (KILN_METRICS_PORT, KILN_METRICS_TENANT_LABELS; docs/operations.md). */
  readonly metrics!: OperationsSettings['metrics'];
  /** Finished builds deleted by policy (KILN_RETENTION_*; tenants may override). */
  readonly retention!: OperationsSettings['retention'];
  /** The audit log (KILN_AUDIT_RETENTION_DAYS). */
  readonly audit!: OperationsSettings['audit'];
  /** OpenTelemetry spans, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set. */
  readonly tracing!: OperationsSettings['tracing'];
  /** Webhooks, polling and commit statuses of triggers (KILN_PUBLIC_URL, KILN_WEBHOOK_*). */
  readonly triggers!: TriggerSettings;

  constructor(values: KilnConfig) {
    Object.assign(this, values);
    Object.freeze(this);
  }
}

/**
 * Validates every variable and throws one ConfigError that lists all the bad ones.
 * `cwd` and `home` make the defaults testable.
 */
export function loadConfig(
  env: Env = process.env,
  cwd: string = process.cwd(),
  home: string = homedir(),
): KilnConfig {
  const read = new EnvReader(env);
  const kube = kubeLocation(env, home);
  // Each reader reports its problems as it finds them; they run in this order so that
  // ConfigError lists problems as it always has (src/config/__fixtures__/config-matrix.json).
  const role = readRole(read);
  const operator = readOperator(read);
  const runner = readRunner(read, kube);
  const server = readServer(read);
  const buildLimits = readBuildLimits(read);
  const storage = readDatabase(read, cwd);
  const keys = readKeys(read, storage.dataDir, cwd);
  const auth = readAuth(read);
  const rateLimits = readRateLimits(read);
  const accessCache = readAccessCache(read);
  const logs = readLogs(read);
  const buildListing = readBuildListing(read);
  const webSockets = readWebSockets(read);
  const localRunner = readLocalRunner(read);
  const login = readLogin(read);
  const externalCalls = readExternalCalls(read);
  const admission = readAdmission(read, runner, localRunner.localMaxParallel);
  const operations = readOperations(read);
  const triggers = readTriggers(read, server.port);
  read.check();
  return new KilnConfig({
    role,
    runner,
    kube,
    ...operator,
    ...server,
    ...buildLimits,
    ...storage,
    ...keys,
    ...auth,
    ...rateLimits,
    ...accessCache,
    ...logs,
    ...buildListing,
    ...webSockets,
    ...localRunner,
    ...login,
    ...externalCalls,
    ...admission,
    ...operations,
    ...triggers,
  });
}
