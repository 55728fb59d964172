import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { EMAIL_PATTERN } from './formats.js';

export const ROLES = ['api', 'operator', 'all'] as const;
export type Role = (typeof ROLES)[number];

export const RUNNERS = ['local', 'kubernetes'] as const;
export type RunnerKind = (typeof RUNNERS)[number];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Where the JWT signing secret comes from; `generated` means kiln keeps one in KILN_DATA_DIR. */
export type JwtSecretSource =
  | { kind: 'value'; secret: string }
  | { kind: 'file'; path: string; secret: string }
  | { kind: 'generated'; path: string };

/**
 * An image pinned by digest (`name[:tag]@sha256:<64 hex>`), as build-methods' isPinnedByDigest
 * checks it: config imports nothing of kiln's, so the rule is stated here too.
 */
const PINNED_IMAGE = /^[^\s@]+@sha256:[0-9a-f]{64}$/;

/** The tools of the steps after the image, whose images KILN_STEP_IMAGE_<TOOL> may set. */
export const STEP_TOOL_NAMES = ['syft', 'grype', 'trivy', 'clair', 'snyk'] as const;
export type StepToolName = (typeof STEP_TOOL_NAMES)[number];

/**
 * The validated configuration. It is the DI token too: inject `KilnConfig` anywhere.
 * Built only by `loadConfig`, which is the one place that reads process.env.
 */
export class KilnConfig {
  readonly role!: Role;
  readonly runner!: RunnerKind;
  /** Where the Kubernetes API server is: a kubeconfig file, the pod's service account, or none. */
  readonly kube!: KubeLocation;
  /** Namespace of Build resources and their Jobs (KILN_BUILD_NAMESPACE). */
  readonly buildNamespace!: string;
  /** Operator: how long an ended build waits for its pod's log streams before a marker line. */
  readonly operatorDrainDeadlineMs!: number;
  /** Operator: how long a builder image may fail to pull before ImagePullFailed. */
  readonly operatorImagePullTimeoutMs!: number;
  /** Operator: ttlSecondsAfterFinished set on a build's Job once its logs are stored. */
  readonly operatorJobTtlSeconds!: number;
  /**
   * Operator: the steps after the image (SBOM, scan). Without KILN_STEP_IMAGE (kiln's own image,
   * pinned by digest) or KILN_UPLOAD_URL (kiln's API as build pods reach it) there are none, and
   * each build's log says so.
   */
  readonly operatorSteps!: {
    readonly kilnImage?: string;
    readonly uploadUrl?: string;
    readonly clairUrl?: string;
    readonly snykToken?: { readonly secret: string; readonly key: string };
    /** KILN_STEP_IMAGE_<TOOL>: a tool's image, pinned by digest, over kiln's default. */
    readonly toolImages: Readonly<Partial<Record<StepToolName, string>>>;
  };
  /** Operator: leader election, watches and workers (KILN_OPERATOR_LEASE_*, _WATCH_*, ...). */
  readonly operatorRuntime!: OperatorRuntimeSettings;
  /**
   * Calls to secret managers and registries when a build starts: per attempt
   * (KILN_EXTERNAL_TIMEOUT_MS) and attempts in all (KILN_EXTERNAL_ATTEMPTS).
   */
  readonly externalCalls!: { readonly timeoutMs: number; readonly attempts: number };
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

  constructor(values: KilnConfig) {
    Object.assign(this, values);
    Object.freeze(this);
  }
}

export class ConfigError extends Error {
  constructor(readonly problems: ReadonlyArray<{ variable: string; expected: string }>) {
    super(
      [
        'kiln: invalid configuration:',
        ...problems.map((p) => `  ${p.variable}: ${p.expected}`),
        'See the Configuration table in README.md.',
      ].join('\n'),
    );
    this.name = 'ConfigError';
  }
}

/** How the operator runs: workers, leader election (client-go's defaults), watches. */
export interface OperatorRuntimeSettings {
  /** Reconciles at once. */
  readonly workers: number;
  /** The Lease that elects one active operator. */
  readonly leaseName: string;
  /**
   * The Lease's namespace: the operator's own in a Helm install (its Role there holds only
   * Leases), else the build namespace.
   */
  readonly leaseNamespace: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** The longest a watch lives before it is restarted (a half-open watch is found by then). */
  readonly watchTimeoutMs: number;
  /** Every cached object is reconciled again this often; 0: never. */
  readonly resyncPeriodMs: number;
}

export type Env = Readonly<Record<string, string | undefined>>;

const MIN_JWT_SECRET_BYTES = 32;
/** KILN_LIST_EXACT_COUNT_LIMIT's default: counting that many index entries takes a few ms. */
export const DEFAULT_LIST_EXACT_COUNT_LIMIT = 10_000;
export const MIN_PASSWORD_LENGTH = 12;

/**
 * Validates every variable and throws one ConfigError that lists all the bad ones.
 * `cwd` and `home` make the defaults testable.
 */
export function loadConfig(
  env: Env = process.env,
  cwd: string = process.cwd(),
  home: string = homedir(),
): KilnConfig {
  const problems: Array<{ variable: string; expected: string }> = [];
  const bad = (variable: string, expected: string, got?: string): undefined => {
    problems.push({
      variable,
      expected: got === undefined ? expected : `${expected}, got ${JSON.stringify(got)}`,
    });
    return undefined;
  };
  const value = (name: string): string | undefined => {
    const raw = env[name];
    return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
  };
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    bad(name, `one of ${allowed.join('|')}`, raw);
    return fallback;
  };
  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
    bad(name, `an integer from ${min} to ${max}`, raw);
    return fallback;
  };

  const role = oneOf('KILN_ROLE', ROLES, 'all');
  const kube = kubeLocation(env, home);
  const buildNamespace = value('KILN_BUILD_NAMESPACE') ?? 'kiln-builds';
  const operatorDrainDeadlineMs =
    integer('KILN_OPERATOR_DRAIN_DEADLINE_SECONDS', 120, 1, 3600) * 1000;
  const operatorImagePullTimeoutMs =
    integer('KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS', 300, 1, 3600) * 1000;
  const operatorJobTtlSeconds = integer('KILN_OPERATOR_JOB_TTL_SECONDS', 3600, 0, 7 * 24 * 3600);
  const httpUrl = (name: string): string | undefined => {
    const raw = value(name);
    if (raw === undefined) return undefined;
    try {
      const url = new URL(raw);
      if ((url.protocol === 'http:' || url.protocol === 'https:') && url.username === '') {
        return raw.replace(/\/+$/, '');
      }
    } catch {
      // reported below
    }
    bad(name, 'an http(s) URL without credentials', raw);
    return undefined;
  };
  const stepImage = value('KILN_STEP_IMAGE');
  if (stepImage !== undefined && !PINNED_IMAGE.test(stepImage)) {
    bad('KILN_STEP_IMAGE', "kiln's image pinned by digest (name@sha256:<64 hex>)", stepImage);
  }
  const snykRaw = value('KILN_SNYK_TOKEN_SECRET');
  const snykMatch =
    snykRaw === undefined ? null : /^([a-z0-9][-a-z0-9.]*)(?:\/([-._a-zA-Z0-9]+))?$/.exec(snykRaw);
  if (snykRaw !== undefined && snykMatch === null) {
    bad('KILN_SNYK_TOKEN_SECRET', 'a Secret name, optionally /key (default key: token)', snykRaw);
  }
  const toolImages: Partial<Record<StepToolName, string>> = {};
  for (const tool of STEP_TOOL_NAMES) {
    const name = `KILN_STEP_IMAGE_${tool.toUpperCase()}`;
    const image = value(name);
    if (image === undefined) continue;
    if (PINNED_IMAGE.test(image)) toolImages[tool] = image;
    else bad(name, `the ${tool} image pinned by digest (name@sha256:<64 hex>)`, image);
  }
  const uploadUrl = httpUrl('KILN_UPLOAD_URL');
  const clairUrl = httpUrl('KILN_CLAIR_URL');
  const operatorSteps = {
    toolImages,
    ...(stepImage === undefined ? {} : { kilnImage: stepImage }),
    ...(uploadUrl === undefined ? {} : { uploadUrl }),
    ...(clairUrl === undefined ? {} : { clairUrl }),
    ...(snykMatch === null || snykMatch[1] === undefined
      ? {}
      : { snykToken: { secret: snykMatch[1], key: snykMatch[2] ?? 'token' } }),
  };
  const operatorRuntime: OperatorRuntimeSettings = {
    workers: integer('KILN_OPERATOR_WORKERS', 4, 1, 64),
    leaseName: value('KILN_OPERATOR_LEASE_NAME') ?? 'kiln-operator',
    leaseNamespace: value('KILN_OPERATOR_LEASE_NAMESPACE') ?? buildNamespace,
    leaseDurationMs: integer('KILN_OPERATOR_LEASE_DURATION_SECONDS', 15, 2, 300) * 1000,
    renewDeadlineMs: integer('KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS', 10, 1, 299) * 1000,
    retryPeriodMs: integer('KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS', 2, 1, 60) * 1000,
    watchTimeoutMs: integer('KILN_OPERATOR_WATCH_TIMEOUT_SECONDS', 300, 5, 3600) * 1000,
    resyncPeriodMs: integer('KILN_OPERATOR_RESYNC_SECONDS', 600, 0, 24 * 3600) * 1000,
  };
  if (!DNS_SUBDOMAIN.test(operatorRuntime.leaseName)) {
    bad('KILN_OPERATOR_LEASE_NAME', 'a Lease name (DNS-1123 subdomain)', operatorRuntime.leaseName);
  }
  // As client-go requires: a leader gives up (renew deadline) before others may take the Lease
  // (lease duration), and retries more than once within the deadline.
  if (operatorRuntime.renewDeadlineMs >= operatorRuntime.leaseDurationMs) {
    bad(
      'KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS',
      'less than KILN_OPERATOR_LEASE_DURATION_SECONDS',
      String(operatorRuntime.renewDeadlineMs / 1000),
    );
  }
  if (operatorRuntime.retryPeriodMs >= operatorRuntime.renewDeadlineMs) {
    bad(
      'KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS',
      'less than KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS',
      String(operatorRuntime.retryPeriodMs / 1000),
    );
  }
  if (!DNS_LABEL.test(operatorRuntime.leaseNamespace)) {
    bad(
      'KILN_OPERATOR_LEASE_NAMESPACE',
      'a namespace name (DNS-1123 label, at most 63 characters)',
      operatorRuntime.leaseNamespace,
    );
  }
  if (!DNS_LABEL.test(buildNamespace)) {
    bad(
      'KILN_BUILD_NAMESPACE',
      'a namespace name (DNS-1123 label, at most 63 characters)',
      buildNamespace,
    );
  }
  const runner = oneOf('KILN_RUNNER', RUNNERS, kube.kind === 'none' ? 'local' : 'kubernetes');
  if (runner === 'kubernetes' && kube.kind === 'none') {
    bad(
      'KILN_RUNNER',
      'local, or kubernetes with a kubeconfig (KUBECONFIG, ~/.kube/config) or a service account',
      'kubernetes',
    );
  }
  const host = value('KILN_HOST') ?? '0.0.0.0';
  const port = integer('PORT', 8080, 1, 65535);
  const logLevel = oneOf('KILN_LOG_LEVEL', LOG_LEVELS, 'info');
  const maxBodyBytes = integer('KILN_MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024);
  const trustProxyHops = integer('KILN_TRUST_PROXY_HOPS', 0, 0, 10);
  const shutdownTimeoutMs = integer('KILN_SHUTDOWN_TIMEOUT_SECONDS', 25, 1, 3600) * 1000;
  const buildTimeoutSeconds = integer('KILN_BUILD_TIMEOUT_SECONDS', 3600, 1, 7 * 24 * 3600);
  const artifactMaxBytes = integer(
    'KILN_ARTIFACT_MAX_BYTES',
    16 * 1024 * 1024,
    1024,
    256 * 1024 * 1024,
  );

  const rawDataDir = value('KILN_DATA_DIR') ?? '.kiln';
  const dataDir = isAbsolute(rawDataDir) ? rawDataDir : resolve(cwd, rawDataDir);

  const databaseUrl = value('DATABASE_URL');
  if (databaseUrl !== undefined && !isPostgresUrl(databaseUrl)) {
    bad(
      'DATABASE_URL',
      'a postgres:// or postgresql:// URL (unset it to use the embedded PostgreSQL)',
    );
  }

  let jwtSecret: JwtSecretSource = { kind: 'generated', path: join(dataDir, 'jwt-secret') };
  const jwt = readJwtSecret(value('KILN_JWT_SECRET'), value('KILN_JWT_SECRET_FILE'), cwd);
  if (jwt !== undefined && 'problem' in jwt) bad(jwt.variable, jwt.problem);
  else if (jwt !== undefined) jwtSecret = jwt;
  let secretsKey: JwtSecretSource = { kind: 'generated', path: join(dataDir, 'secrets-key') };
  const sealing = readJwtSecret(
    value('KILN_SECRETS_KEY'),
    value('KILN_SECRETS_KEY_FILE'),
    cwd,
    'KILN_SECRETS_KEY',
  );
  if (sealing !== undefined && 'problem' in sealing) bad(sealing.variable, sealing.problem);
  else if (sealing !== undefined) secretsKey = sealing;

  const jwtTtlSeconds = integer('KILN_JWT_TTL_SECONDS', 900, 60, 86_400);
  const jwtIssuer = value('KILN_JWT_ISSUER') ?? 'kiln';
  const jwtAudience = value('KILN_JWT_AUDIENCE') ?? 'kiln-api';
  const loginMaxFailures = integer('KILN_LOGIN_MAX_FAILURES', 10, 1, 1000);
  const rateLimitReads = integer('KILN_RATE_LIMIT_READS', 600, 0, 1_000_000);
  const rateLimitWrites = integer('KILN_RATE_LIMIT_WRITES', 60, 0, 1_000_000);
  const rateLimitWindowSeconds = integer('KILN_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 3600);
  const rateLimitFlushMs = integer('KILN_RATE_LIMIT_FLUSH_MS', 100, 10, 600_000);
  const rateLimitMaxKeys = integer('KILN_RATE_LIMIT_MAX_KEYS', 50_000, 1, 10_000_000);
  const accessCacheTtlMs = integer('KILN_ACCESS_CACHE_TTL_MS', 5000, 0, 600_000);
  const logMaxBytesPerBuild = integer(
    'KILN_LOG_MAX_BYTES_PER_BUILD',
    100 * 1024 * 1024,
    1024,
    10 * 1024 ** 3,
  );
  const logPurgeBatchLines = integer('KILN_LOG_PURGE_BATCH_LINES', 5000, 1, 1_000_000);
  const logPurgePauseMs = integer('KILN_LOG_PURGE_PAUSE_MS', 50, 0, 60_000);
  const logPurgePollMs = integer('KILN_LOG_PURGE_POLL_SECONDS', 10, 1, 3600) * 1000;
  const listExactCountLimit = integer(
    'KILN_LIST_EXACT_COUNT_LIMIT',
    DEFAULT_LIST_EXACT_COUNT_LIMIT,
    0,
    1_000_000,
  );
  const wsMaxConnectionsPerUser = integer('KILN_WS_MAX_CONNECTIONS_PER_USER', 20, 1, 10_000);
  const wsHeartbeatMs = integer('KILN_WS_HEARTBEAT_SECONDS', 30, 1, 3600) * 1000;
  const wsStallMs = integer('KILN_WS_STALL_SECONDS', 10, 1, 3600) * 1000;
  const wsPollMs = integer('KILN_WS_POLL_SECONDS', 5, 1, 3600) * 1000;
  const wsAllowedOrigins = (value('KILN_WS_ALLOWED_ORIGINS') ?? '')
    .split(',')
    .map((origin) => origin.trim())
    .filter((origin) => origin !== '');
  for (const origin of wsAllowedOrigins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) {
      bad(
        'KILN_WS_ALLOWED_ORIGINS',
        'comma-separated origins such as https://builds.example.com',
        origin,
      );
    }
  }
  const localMaxParallel = integer('KILN_LOCAL_MAX_PARALLEL', 2, 1, 64);
  const localRegistry = value('KILN_LOCAL_REGISTRY');
  if (
    localRegistry !== undefined &&
    !/^[A-Za-z0-9.-]+(:\d+)?(\/[a-z0-9._/-]+)?$/.test(localRegistry)
  ) {
    bad('KILN_LOCAL_REGISTRY', 'host[:port][/path], e.g. 127.0.0.1:5000/kiln', localRegistry);
  }
  const localInsecureRegistries = (value('KILN_LOCAL_INSECURE_REGISTRIES') ?? '')
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
  const localAuthFile = value('KILN_LOCAL_AUTHFILE');
  const cancelGraceMs = integer('KILN_CANCEL_GRACE_SECONDS', 10, 0, 600) * 1000;
  const childEnvironment = childEnvironmentOf(env);
  const loginWindowSeconds = integer('KILN_LOGIN_WINDOW_SECONDS', 900, 1, 86_400);

  let bootstrapAdmin: { email: string; password: string } | undefined;
  const adminEmail = value('KILN_BOOTSTRAP_ADMIN_EMAIL');
  const adminPassword = env['KILN_BOOTSTRAP_ADMIN_PASSWORD'] ?? '';
  if (adminEmail !== undefined || adminPassword !== '') {
    if (adminEmail === undefined || !EMAIL_PATTERN.test(adminEmail)) {
      bad(
        'KILN_BOOTSTRAP_ADMIN_EMAIL',
        'an e-mail address (set together with KILN_BOOTSTRAP_ADMIN_PASSWORD)',
      );
    } else if (adminPassword.length < MIN_PASSWORD_LENGTH) {
      bad(
        'KILN_BOOTSTRAP_ADMIN_PASSWORD',
        `a password of at least ${MIN_PASSWORD_LENGTH} characters`,
      );
    } else {
      bootstrapAdmin = { email: adminEmail.toLowerCase(), password: adminPassword };
    }
  }

  const externalCalls = {
    timeoutMs: integer('KILN_EXTERNAL_TIMEOUT_MS', 5000, 100, 120_000),
    attempts: integer('KILN_EXTERNAL_ATTEMPTS', 3, 1, 10),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return new KilnConfig({
    role,
    externalCalls,
    kube,
    buildNamespace,
    operatorDrainDeadlineMs,
    operatorImagePullTimeoutMs,
    operatorJobTtlSeconds,
    operatorSteps,
    operatorRuntime,
    runner,
    host,
    port,
    databaseUrl,
    dataDir,
    jwtSecret,
    secretsKey,
    jwtTtlSeconds,
    jwtIssuer,
    jwtAudience,
    bootstrapAdmin,
    loginMaxFailures,
    loginWindowSeconds,
    rateLimitReads,
    rateLimitWrites,
    rateLimitWindowSeconds,
    rateLimitFlushMs,
    rateLimitMaxKeys,
    accessCacheTtlMs,
    logMaxBytesPerBuild,
    logPurgeBatchLines,
    logPurgePauseMs,
    logPurgePollMs,
    listExactCountLimit,
    wsAllowedOrigins,
    wsMaxConnectionsPerUser,
    wsHeartbeatMs,
    wsStallMs,
    wsPollMs,
    localMaxParallel,
    localRegistry,
    localInsecureRegistries,
    localAuthFile,
    cancelGraceMs,
    childEnvironment,
    logLevel,
    maxBodyBytes,
    trustProxyHops,
    shutdownTimeoutMs,
    buildTimeoutSeconds,
    artifactMaxBytes,
  });

  function readJwtSecret(
    secret: string | undefined,
    file: string | undefined,
    base: string,
    variable = 'KILN_JWT_SECRET',
  ): JwtSecretSource | { variable: string; problem: string } | undefined {
    if (secret !== undefined && file !== undefined) {
      return {
        variable,
        problem: `set either ${variable} or ${variable}_FILE, not both`,
      };
    }
    if (secret !== undefined) {
      return Buffer.byteLength(secret) >= MIN_JWT_SECRET_BYTES
        ? { kind: 'value', secret }
        : { variable, problem: `at least ${MIN_JWT_SECRET_BYTES} bytes` };
    }
    if (file !== undefined) {
      const path = isAbsolute(file) ? file : resolve(base, file);
      let content: string;
      try {
        content = readFileSync(path, 'utf8').trim();
      } catch {
        return {
          variable: `${variable}_FILE`,
          problem: `a readable file, cannot read ${path}`,
        };
      }
      return Buffer.byteLength(content) >= MIN_JWT_SECRET_BYTES
        ? { kind: 'file', path, secret: content }
        : {
            variable: `${variable}_FILE`,
            problem: `a file holding at least ${MIN_JWT_SECRET_BYTES} bytes, ${path} is shorter`,
          };
    }
    return undefined;
  }
}

const CHILD_VARIABLES = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LANGUAGE',
  'TMPDIR',
  'TZ',
  ...['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY'].flatMap((name) => [
    name,
    name.toLowerCase(),
  ]),
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'GIT_SSL_CAINFO',
  'GIT_SSL_CAPATH',
  'REGISTRY_AUTH_FILE',
  'XDG_RUNTIME_DIR',
  'XDG_CONFIG_HOME',
  'DOCKER_HOST',
  'DOCKER_CONFIG',
  'DOCKER_CERT_PATH',
  'DOCKER_TLS_VERIFY',
  'PACK_HOME',
  'CHECKPOINT_DISABLE',
]);
const CHILD_PREFIXES = ['LC_', 'CONTAINERS_', 'PACKER_'];
/** kiln's own state: never handed to a child, even if an allowlist entry matched it. */
const KILN_STATE = /^(KILN_|PG|DATABASE_URL$)/i;
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The allowlisted subset of `env` that child processes inherit (see KilnConfig.childEnvironment). */
function childEnvironmentOf(env: Env): Readonly<Record<string, string>> {
  const inherited: Record<string, string> = { PATH: DEFAULT_PATH };
  for (const [name, raw] of Object.entries(env)) {
    if (raw === undefined || raw === '' || KILN_STATE.test(name)) continue;
    if (CHILD_VARIABLES.has(name) || CHILD_PREFIXES.some((prefix) => name.startsWith(prefix)))
      inherited[name] = raw;
  }
  return Object.freeze(inherited);
}

function isPostgresUrl(raw: string): boolean {
  try {
    const url = new URL(raw);
    return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '';
  } catch {
    return false;
  }
}

export type KubeLocation =
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'cluster' }
  | { readonly kind: 'none' };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The places client-node's loadFromDefault() looks, in its order, read here so that config stays
 * the only reader of the environment: the first existing file of KUBECONFIG, ~/.kube/config, then
 * the pod's service account.
 */
export function kubeLocation(env: Env, home: string): KubeLocation {
  const kubeconfig = env['KUBECONFIG'];
  if (kubeconfig !== undefined && kubeconfig !== '') {
    const path = kubeconfig.split(':').find((p) => p !== '' && existsSync(p));
    return path === undefined ? { kind: 'none' } : { kind: 'file', path };
  }
  const path = join(home, '.kube', 'config');
  if (existsSync(path)) return { kind: 'file', path };
  return (env['KUBERNETES_SERVICE_HOST'] ?? '') !== '' &&
    existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')
    ? { kind: 'cluster' }
    : { kind: 'none' };
}
