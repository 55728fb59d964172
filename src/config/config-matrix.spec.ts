import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type Env, KilnConfig, loadConfig } from './config.js';

/*
 * Characterization of loadConfig: a matrix of environments and, for each, what loadConfig made of
 * it (the whole configuration, or the ConfigError's message), recorded in
 * __fixtures__/config-matrix.json. The fixture was written by the code before the split into one
 * reader per concern (docs/adr/0035-configuration-per-concern.md); any difference is a change of
 * behaviour. Only when one is intended, rewrite the fixture and review its diff:
 *
 *   KILN_UPDATE_CONFIG_MATRIX=1 npx jest src/config/config-matrix.spec.ts
 *
 * Paths under this run's temporary directory are written as <tmp>; a field set to undefined as
 * "<undefined>" (JSON would drop it). A configuration is recorded whole for the empty environment
 * and as the fields that differ from it for every other one.
 */

const FIXTURE = join(__dirname, '__fixtures__', 'config-matrix.json');
const UPDATE = process.env['KILN_UPDATE_CONFIG_MATRIX'] === '1';
const UNDEFINED = '<undefined>';
const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

type Home = 'empty' | 'kube';
interface Case {
  readonly name: string;
  readonly env: Readonly<Record<string, string>>;
  /** `kube`: a home directory holding .kube/config. */
  readonly home?: Home;
}
type Result =
  | { readonly config: Record<string, unknown> }
  | { readonly changed: Record<string, unknown> }
  | { readonly error: string; readonly message: readonly string[] };
interface Recorded extends Case {
  readonly result: Result;
}

const hex = (digit: string) => digit.repeat(64);
const pinned = (image: string, digit: string) => `${image}@sha256:${hex(digit)}`;
const TOOLS = ['syft', 'grype', 'trivy', 'clair', 'snyk'] as const;

/** A valid value, other than the default, for every variable loadConfig reads. */
const VALID: Readonly<Record<string, string>> = {
  KILN_ROLE: 'operator',
  KILN_BUILD_NAMESPACE: 'ci-builds',
  KILN_BUILD_NAMESPACE_RESTRICTED: 'ci-builds-restricted',
  KILN_BUILD_NAMESPACE_BASELINE: 'ci-builds-baseline',
  KILN_BUILD_NAMESPACE_PRIVILEGED: 'ci-builds-privileged',
  KILN_BUILD_USER_NAMESPACES: 'true',
  KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '30',
  KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS: '600',
  KILN_OPERATOR_JOB_TTL_SECONDS: '0',
  KILN_OPERATOR_UNSCHEDULABLE_SECONDS: '60',
  KILN_STEP_IMAGE: pinned('registry.example.com/kiln/kiln:1.2.3', 'a'),
  KILN_SNYK_TOKEN_SECRET: 'snyk-credentials/api-token',
  KILN_STEP_IMAGE_SYFT: pinned('registry.example.com/tools/syft:1', '1'),
  KILN_STEP_IMAGE_GRYPE: pinned('registry.example.com/tools/grype:1', '2'),
  KILN_STEP_IMAGE_TRIVY: pinned('registry.example.com/tools/trivy:1', '3'),
  KILN_STEP_IMAGE_CLAIR: pinned('registry.example.com/tools/clair:1', '4'),
  KILN_STEP_IMAGE_SNYK: pinned('registry.example.com/tools/snyk:1', '5'),
  KILN_UPLOAD_URL: 'http://kiln.kiln.svc:80/',
  KILN_CLAIR_URL: 'https://clair.example.com//',
  KILN_OPERATOR_WORKERS: '16',
  KILN_OPERATOR_LEASE_NAME: 'kiln-operator.blue',
  KILN_OPERATOR_LEASE_NAMESPACE: 'kiln-system',
  KILN_OPERATOR_LEASE_DURATION_SECONDS: '30',
  KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS: '12',
  KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS: '3',
  KILN_OPERATOR_WATCH_TIMEOUT_SECONDS: '60',
  KILN_OPERATOR_RESYNC_SECONDS: '0',
  KILN_RUNNER: 'local',
  KILN_HOST: '127.0.0.1',
  PORT: '9090',
  KILN_LOG_LEVEL: 'debug',
  KILN_MAX_BODY_BYTES: '2097152',
  KILN_TRUST_PROXY_HOPS: '2',
  KILN_SHUTDOWN_TIMEOUT_SECONDS: '40',
  KILN_BUILD_TIMEOUT_SECONDS: '7200',
  KILN_ARTIFACT_MAX_BYTES: '1048576',
  KILN_DATA_DIR: '/var/lib/kiln',
  DATABASE_URL: 'postgres://kiln:test-password@db.internal:5432/kiln',
  KILN_JWT_SECRET: 'test-jwt-secret-0123456789abcdefghij',
  KILN_JWT_SECRET_FILE: '<tmp>/secrets/jwt-secret',
  KILN_SECRETS_KEY: 'test-sealing-key-0123456789abcdefghij',
  KILN_SECRETS_KEY_FILE: '<tmp>/secrets/sealing-key',
  KILN_JWT_TTL_SECONDS: '300',
  KILN_JWT_ISSUER: 'kiln-test',
  KILN_JWT_AUDIENCE: 'kiln-test-api',
  KILN_LOGIN_MAX_FAILURES: '5',
  KILN_API_TOKEN_MAX_DAYS: '90',
  KILN_RATE_LIMIT_READS: '1200',
  KILN_RATE_LIMIT_WRITES: '0',
  KILN_RATE_LIMIT_WINDOW_SECONDS: '30',
  KILN_RATE_LIMIT_FLUSH_MS: '250',
  KILN_RATE_LIMIT_MAX_KEYS: '1000',
  KILN_ACCESS_CACHE_TTL_MS: '0',
  KILN_LOG_MAX_BYTES_PER_BUILD: '1048576',
  KILN_LOG_PURGE_BATCH_LINES: '100',
  KILN_LOG_PURGE_PAUSE_MS: '0',
  KILN_LOG_PURGE_POLL_SECONDS: '60',
  KILN_LIST_EXACT_COUNT_LIMIT: '500',
  KILN_WS_MAX_CONNECTIONS_PER_USER: '5',
  KILN_WS_HEARTBEAT_SECONDS: '15',
  KILN_WS_STALL_SECONDS: '20',
  KILN_WS_POLL_SECONDS: '2',
  KILN_WS_ALLOWED_ORIGINS: 'https://builds.example.com, http://localhost:5173',
  KILN_LOCAL_MAX_PARALLEL: '4',
  KILN_LOCAL_REGISTRY: '127.0.0.1:5000/kiln',
  KILN_LOCAL_INSECURE_REGISTRIES: '127.0.0.1:5000, ,registry.local',
  KILN_LOCAL_AUTHFILE: '/etc/kiln/auth.json',
  KILN_CANCEL_GRACE_SECONDS: '0',
  KILN_LOCAL_CACHE_MAX_BYTES: '1073741824',
  KILN_LOGIN_WINDOW_SECONDS: '600',
  KILN_BOOTSTRAP_ADMIN_EMAIL: 'Admin@Example.com',
  KILN_BOOTSTRAP_ADMIN_PASSWORD: 'test-admin-password',
  KILN_EXTERNAL_TIMEOUT_MS: '2000',
  KILN_EXTERNAL_ATTEMPTS: '1',
  KILN_MAX_RUNNING: '8',
  KILN_TENANT_MAX_RUNNING: '3',
  KILN_PROJECT_MAX_RUNNING: '0',
  KILN_QUEUE_TTL_SECONDS: '3600',
  KILN_TENANT_MAX_QUEUED: '50',
  KILN_ADMISSION_POLL_MS: '250',
  // kueue refuses KILN_MAX_RUNNING and the local runner: its own cases below (admission()).
  KILN_ADMISSION: 'kiln',
  KILN_KUEUE_LOCAL_QUEUE: 'builds',
  KILN_KUEUE_LOCAL_QUEUES:
    '0a9e4c1e-6b1f-4c7e-9a51-2f3d4e5f6a7b=team-a, 1B2C3D4E-5F60-4718-8293-A4B5C6D7E8F9 = team-b',
  KILN_METRICS_PORT: '9090',
  KILN_METRICS_TENANT_LABELS: 'true',
  KILN_RETENTION_DAYS: '30',
  KILN_RETENTION_KEEP_LAST: '50',
  KILN_RETENTION_INTERVAL_SECONDS: '600',
  KILN_RETENTION_BATCH_BUILDS: '20',
  KILN_AUDIT_RETENTION_DAYS: '90',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318',
  OTEL_SERVICE_NAME: 'kiln-api',
  KILN_PUBLIC_URL: 'https://kiln.example.com/',
  KILN_WEBHOOK_MAX_BODY_BYTES: '1048576',
  KILN_WEBHOOK_RATE_LIMIT: '30',
  KILN_TRIGGER_WORK_INTERVAL_MS: '2000',
  KILN_POLL_TIMEOUT_SECONDS: '30',
  KUBECONFIG: '<tmp>/kubeconfig',
  KUBERNETES_SERVICE_HOST: '10.96.0.1',
};

/** Every integer variable with the range loadConfig accepts. */
const INTEGERS: ReadonlyArray<readonly [string, number, number]> = [
  ['KILN_OPERATOR_DRAIN_DEADLINE_SECONDS', 1, 3600],
  ['KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS', 1, 3600],
  ['KILN_OPERATOR_JOB_TTL_SECONDS', 0, 604_800],
  ['KILN_OPERATOR_WORKERS', 1, 64],
  ['KILN_OPERATOR_LEASE_DURATION_SECONDS', 2, 300],
  ['KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS', 1, 299],
  ['KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS', 1, 60],
  ['KILN_OPERATOR_WATCH_TIMEOUT_SECONDS', 5, 3600],
  ['KILN_OPERATOR_RESYNC_SECONDS', 0, 86_400],
  ['PORT', 1, 65_535],
  ['KILN_MAX_BODY_BYTES', 1024, 67_108_864],
  ['KILN_TRUST_PROXY_HOPS', 0, 10],
  ['KILN_SHUTDOWN_TIMEOUT_SECONDS', 1, 3600],
  ['KILN_BUILD_TIMEOUT_SECONDS', 1, 604_800],
  ['KILN_ARTIFACT_MAX_BYTES', 1024, 268_435_456],
  ['KILN_JWT_TTL_SECONDS', 60, 86_400],
  ['KILN_LOGIN_MAX_FAILURES', 1, 1000],
  ['KILN_API_TOKEN_MAX_DAYS', 1, 3650],
  ['KILN_RATE_LIMIT_READS', 0, 1_000_000],
  ['KILN_RATE_LIMIT_WRITES', 0, 1_000_000],
  ['KILN_RATE_LIMIT_WINDOW_SECONDS', 1, 3600],
  ['KILN_RATE_LIMIT_FLUSH_MS', 10, 600_000],
  ['KILN_RATE_LIMIT_MAX_KEYS', 1, 10_000_000],
  ['KILN_ACCESS_CACHE_TTL_MS', 0, 600_000],
  ['KILN_LOG_MAX_BYTES_PER_BUILD', 1024, 10_737_418_240],
  ['KILN_LOG_PURGE_BATCH_LINES', 1, 1_000_000],
  ['KILN_LOG_PURGE_PAUSE_MS', 0, 60_000],
  ['KILN_LOG_PURGE_POLL_SECONDS', 1, 3600],
  ['KILN_LIST_EXACT_COUNT_LIMIT', 0, 1_000_000],
  ['KILN_WS_MAX_CONNECTIONS_PER_USER', 1, 10_000],
  ['KILN_WS_HEARTBEAT_SECONDS', 1, 3600],
  ['KILN_WS_STALL_SECONDS', 1, 3600],
  ['KILN_WS_POLL_SECONDS', 1, 3600],
  ['KILN_LOCAL_MAX_PARALLEL', 1, 64],
  ['KILN_CANCEL_GRACE_SECONDS', 0, 600],
  ['KILN_LOCAL_CACHE_MAX_BYTES', 0, 2 ** 50],
  ['KILN_LOGIN_WINDOW_SECONDS', 1, 86_400],
  ['KILN_EXTERNAL_TIMEOUT_MS', 100, 120_000],
  ['KILN_EXTERNAL_ATTEMPTS', 1, 10],
  ['KILN_OPERATOR_UNSCHEDULABLE_SECONDS', 1, 86_400],
  ['KILN_METRICS_PORT', 1, 65_535],
  ['KILN_RETENTION_DAYS', 0, 36_500],
  ['KILN_RETENTION_KEEP_LAST', 0, 1_000_000],
  ['KILN_RETENTION_INTERVAL_SECONDS', 10, 604_800],
  ['KILN_RETENTION_BATCH_BUILDS', 1, 10_000],
  ['KILN_AUDIT_RETENTION_DAYS', 0, 36_500],
  ['KILN_WEBHOOK_MAX_BODY_BYTES', 1024, 104_857_600],
  ['KILN_WEBHOOK_RATE_LIMIT', 0, 100_000],
  ['KILN_TRIGGER_WORK_INTERVAL_MS', 100, 300_000],
  ['KILN_POLL_TIMEOUT_SECONDS', 1, 3600],
  ['KILN_MAX_RUNNING', 0, 100_000],
  ['KILN_TENANT_MAX_RUNNING', 0, 100_000],
  ['KILN_PROJECT_MAX_RUNNING', 0, 100_000],
  ['KILN_QUEUE_TTL_SECONDS', 1, 2_592_000],
  ['KILN_TENANT_MAX_QUEUED', 0, 10_000_000],
  ['KILN_ADMISSION_POLL_MS', 10, 60_000],
];

/** One invalid value per variable that can be invalid, all at once: the order of the problems. */
const INVALID: Readonly<Record<string, string>> = {
  ...Object.fromEntries(INTEGERS.map(([name, , max]) => [name, String(max + 1)])),
  KILN_ROLE: 'worker',
  KILN_RUNNER: 'docker',
  KILN_LOG_LEVEL: 'loud',
  KILN_BUILD_NAMESPACE: 'Not_A_Namespace',
  KILN_BUILD_NAMESPACE_RESTRICTED: 'Restricted',
  KILN_BUILD_NAMESPACE_BASELINE: 'baseline.builds',
  KILN_BUILD_NAMESPACE_PRIVILEGED: 'privileged-',
  KILN_BUILD_ALLOW_PRIVILEGED: 'no',
  KILN_BUILD_USER_NAMESPACES: 'yes',
  KILN_ADMISSION: 'fifo',
  KILN_KUEUE_LOCAL_QUEUE: 'Not_A_Queue',
  KILN_KUEUE_LOCAL_QUEUES: 'nobody=queue',
  KILN_STEP_IMAGE: 'kiln:latest',
  KILN_SNYK_TOKEN_SECRET: 'Snyk Token',
  ...Object.fromEntries(TOOLS.map((tool) => [`KILN_STEP_IMAGE_${tool.toUpperCase()}`, tool])),
  KILN_UPLOAD_URL: 'ftp://kiln.kiln.svc',
  KILN_CLAIR_URL: 'http://user:test-password@clair',
  KILN_OPERATOR_LEASE_NAME: 'Kiln_Operator',
  KILN_OPERATOR_LEASE_NAMESPACE: 'kiln.system',
  DATABASE_URL: 'mysql://db/kiln',
  KILN_JWT_SECRET: 'short-test-secret',
  KILN_SECRETS_KEY_FILE: '<tmp>/secrets/missing',
  KILN_WS_ALLOWED_ORIGINS: 'builds.example.com,https://ok.example.com,http://x/path',
  KILN_LOCAL_REGISTRY: 'https://registry.example.com',
  KILN_BOOTSTRAP_ADMIN_EMAIL: 'not-an-address',
  KILN_BOOTSTRAP_ADMIN_PASSWORD: 'test-admin-password',
};

function only(name: string, value: string): Record<string, string> {
  return { [name]: value };
}

/** KILN_ADMISSION=kueue and what it refuses. */
function admission(): Case[] {
  const kube = { KILN_RUNNER: 'kubernetes', KUBECONFIG: '<tmp>/kubeconfig' };
  return [
    {
      name: 'admission: kueue with the kubernetes runner',
      env: { ...kube, KILN_ADMISSION: 'kueue' },
    },
    {
      name: 'admission: kueue with a LocalQueue per tenant',
      env: {
        ...kube,
        KILN_ADMISSION: 'kueue',
        KILN_KUEUE_LOCAL_QUEUE: 'shared',
        KILN_KUEUE_LOCAL_QUEUES: '0a9e4c1e-6b1f-4c7e-9a51-2f3d4e5f6a7b=team-a',
      },
    },
    { name: 'admission: kueue with the local runner', env: only('KILN_ADMISSION', 'kueue') },
    {
      name: 'admission: kueue with an installation limit',
      env: { ...kube, KILN_ADMISSION: 'kueue', KILN_MAX_RUNNING: '4' },
    },
    {
      name: 'admission: bad LocalQueue names',
      env: {
        KILN_KUEUE_LOCAL_QUEUE: 'Builds',
        KILN_KUEUE_LOCAL_QUEUES: 'team-a=builds, 0a9e4c1e-6b1f-4c7e-9a51-2f3d4e5f6a7b=',
      },
    },
  ];
}

function cases(): Case[] {
  const all: Case[] = [
    { name: 'defaults: the empty environment', env: {} },
    {
      name: 'every variable valid and not the default (one secret of each kind)',
      env: Object.fromEntries(
        Object.entries({ ...VALID, KILN_RUNNER: 'kubernetes' }).filter(
          ([name]) => name !== 'KILN_JWT_SECRET_FILE' && name !== 'KILN_SECRETS_KEY',
        ),
      ),
    },
    { name: 'every variable invalid at once', env: INVALID },
    {
      name: 'every variable invalid at once, kubernetes runner without a kubeconfig',
      env: { ...INVALID, KILN_RUNNER: 'kubernetes' },
    },
  ];
  for (const [name, value] of Object.entries(VALID)) {
    if (name === 'KILN_BOOTSTRAP_ADMIN_PASSWORD') continue;
    const env =
      name === 'KILN_BOOTSTRAP_ADMIN_EMAIL'
        ? { [name]: value, KILN_BOOTSTRAP_ADMIN_PASSWORD: VALID['KILN_BOOTSTRAP_ADMIN_PASSWORD']! }
        : only(name, value);
    all.push({ name: `valid alone: ${name}`, env });
  }
  for (const [name, min, max] of INTEGERS) {
    const values = [String(min), String(max), min === 0 ? '-1' : String(min - 1), String(max + 1)];
    for (const value of [...values, 'abc', '1.5']) {
      all.push({ name: `integer ${name}=${value}`, env: only(name, value) });
    }
  }
  all.push(...integerForms(), ...choices(), ...names(), ...steps(), ...urls());
  all.push(...secrets(), ...bootstrapAdmin(), ...kube(), ...operatorLease(), ...lists());
  all.push(...childEnvironment(), ...combinations(), ...admission());
  return all;
}

/** How an integer is written: only ASCII digits, surrounding blanks trimmed. */
function integerForms(): Case[] {
  return [' 9090 ', '+80', '0x50', '1e3', '080', '٣', '9007199254740993', '', '   '].map(
    (value) => ({ name: `integer form PORT=${JSON.stringify(value)}`, env: only('PORT', value) }),
  );
}

function choices(): Case[] {
  const values: Record<string, string[]> = {
    KILN_ROLE: ['api', 'operator', 'all', 'API', ' api ', 'worker'],
    KILN_RUNNER: ['local', 'kubernetes', 'Local', 'docker'],
    KILN_LOG_LEVEL: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'DEBUG', 'verbose'],
    KILN_BUILD_ALLOW_PRIVILEGED: ['true', 'false', 'False', '0'],
    KILN_BUILD_USER_NAMESPACES: ['true', 'false', 'TRUE', '1'],
    KILN_ADMISSION: ['kiln', 'Kueue', 'volcano'],
    KILN_METRICS_TENANT_LABELS: ['true', 'false', 'yes'],
  };
  return Object.entries(values).flatMap(([name, list]) =>
    list.map((value) => ({
      name: `choice ${name}=${JSON.stringify(value)}`,
      env: only(name, value),
    })),
  );
}

/** Kubernetes names, and the other free-form strings. */
function names(): Case[] {
  const values: Record<string, string[]> = {
    KILN_BUILD_NAMESPACE: [
      'a'.repeat(63),
      'a'.repeat(64),
      '-builds',
      'builds-',
      'ci.builds',
      ' ci ',
    ],
    KILN_BUILD_NAMESPACE_RESTRICTED: ['a'.repeat(63), 'a'.repeat(64), '-builds', ' ci '],
    KILN_BUILD_NAMESPACE_BASELINE: ['builds-', 'ci.builds'],
    KILN_BUILD_NAMESPACE_PRIVILEGED: ['Builds', ' ci-privileged '],
    KILN_OPERATOR_LEASE_NAME: ['a.b-c.d', 'a'.repeat(253), 'a'.repeat(254), '.lease', 'Lease'],
    KILN_OPERATOR_LEASE_NAMESPACE: ['a'.repeat(64), 'kiln_system'],
    KILN_HOST: [' ::1 ', 'localhost'],
    KILN_JWT_ISSUER: [' https://kiln.example.com '],
    KILN_DATA_DIR: ['state', './state/../other', ' /var/lib/kiln/ '],
    KILN_LOCAL_REGISTRY: [
      'localhost',
      'registry.example.com:443',
      'host/UPPER',
      'host:port',
      'a b',
    ],
    KILN_LOCAL_AUTHFILE: ['auth.json'],
  };
  return Object.entries(values).flatMap(([name, list]) =>
    list.map((value) => ({
      name: `string ${name}=${JSON.stringify(value)}`,
      env: only(name, value),
    })),
  );
}

function steps(): Case[] {
  const image = VALID['KILN_STEP_IMAGE']!;
  const upload = VALID['KILN_UPLOAD_URL']!;
  return [
    {
      name: 'steps on: image and upload URL',
      env: { KILN_STEP_IMAGE: image, KILN_UPLOAD_URL: upload },
    },
    {
      name: 'steps on with clair and snyk',
      env: {
        KILN_STEP_IMAGE: image,
        KILN_UPLOAD_URL: upload,
        KILN_CLAIR_URL: 'http://clair.kiln.svc:6060',
        KILN_SNYK_TOKEN_SECRET: 'snyk',
        KILN_STEP_IMAGE_CLAIR: VALID['KILN_STEP_IMAGE_CLAIR']!,
        KILN_STEP_IMAGE_SNYK: VALID['KILN_STEP_IMAGE_SNYK']!,
      },
    },
    { name: 'step image: a tag, not pinned', env: only('KILN_STEP_IMAGE', 'kiln:1.2.3') },
    {
      name: 'step image: upper-case digest',
      env: only('KILN_STEP_IMAGE', pinned('kiln', 'A')),
    },
    { name: 'step image: short digest', env: only('KILN_STEP_IMAGE', 'kiln@sha256:abc') },
    ...TOOLS.map((tool) => ({
      name: `step tool image ${tool}: not pinned`,
      env: only(`KILN_STEP_IMAGE_${tool.toUpperCase()}`, `${tool}:latest`),
    })),
    {
      name: 'step tool image: lower-case variable ignored',
      env: only('KILN_STEP_IMAGE_syft', 'x'),
    },
    ...['snyk', 'snyk-token/token.key', 'a/b/c', 'Snyk', 'snyk/', '/key', '-snyk'].map((value) => ({
      name: `snyk token secret ${JSON.stringify(value)}`,
      env: only('KILN_SNYK_TOKEN_SECRET', value),
    })),
  ];
}

function urls(): Case[] {
  const http = [
    'http://kiln',
    'https://kiln.example.com/api///',
    'http://user@kiln',
    'http://:test-password@kiln',
    'ftp://kiln',
    'kiln.kiln.svc',
    'http://',
  ];
  const postgres = [
    'postgresql://kiln@db/kiln?sslmode=require',
    'postgres:///kiln',
    'postgres://db',
    'mysql://db/kiln',
    'not a url',
    ' postgres://db/kiln ',
  ];
  return [
    ...http.flatMap((value) =>
      ['KILN_UPLOAD_URL', 'KILN_CLAIR_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT'].map((name) => ({
        name: `url ${name}=${JSON.stringify(value)}`,
        env: only(name, value),
      })),
    ),
    ...postgres.map((value) => ({
      name: `database DATABASE_URL=${JSON.stringify(value)}`,
      env: only('DATABASE_URL', value),
    })),
    {
      name: 'database: DATABASE_URL with a data directory',
      env: { DATABASE_URL: VALID['DATABASE_URL']!, KILN_DATA_DIR: 'state' },
    },
    {
      name: 'database: embedded under a relative data directory',
      env: only('KILN_DATA_DIR', 'data'),
    },
  ];
}

function secrets(): Case[] {
  const kinds = [
    ['KILN_JWT_SECRET', 'jwt-secret'],
    ['KILN_SECRETS_KEY', 'sealing-key'],
  ] as const;
  return kinds.flatMap(([name, file]) => [
    { name: `${name}: 31 bytes`, env: only(name, 'x'.repeat(31)) },
    { name: `${name}: 32 bytes`, env: only(name, 'x'.repeat(32)) },
    { name: `${name}: 11 characters, 33 bytes`, env: only(name, '€'.repeat(11)) },
    { name: `${name}: surrounding blanks trimmed`, env: only(name, `  ${'x'.repeat(31)}  `) },
    {
      name: `${name}: value and file both set`,
      env: { [name]: 'x'.repeat(40), [`${name}_FILE`]: `<tmp>/secrets/${file}` },
    },
    { name: `${name}_FILE: absolute`, env: only(`${name}_FILE`, `<tmp>/secrets/${file}`) },
    { name: `${name}_FILE: relative to cwd`, env: only(`${name}_FILE`, 'secret-file') },
    { name: `${name}_FILE: too short`, env: only(`${name}_FILE`, '<tmp>/secrets/short') },
    { name: `${name}_FILE: missing`, env: only(`${name}_FILE`, '<tmp>/secrets/missing') },
    { name: `${name}_FILE: a directory`, env: only(`${name}_FILE`, '<tmp>/secrets') },
  ]);
}

function bootstrapAdmin(): Case[] {
  const email = 'KILN_BOOTSTRAP_ADMIN_EMAIL';
  const password = 'KILN_BOOTSTRAP_ADMIN_PASSWORD';
  return [
    { name: 'admin: e-mail only', env: only(email, 'admin@example.com') },
    { name: 'admin: password only', env: only(password, 'test-admin-password') },
    { name: 'admin: password of blanks only', env: only(password, '   ') },
    {
      name: 'admin: bad e-mail',
      env: { [email]: 'admin@localhost', [password]: 'test-admin-password' },
    },
    {
      name: 'admin: 11-character password',
      env: { [email]: 'a@b.co', [password]: 'x'.repeat(11) },
    },
    {
      name: 'admin: 12-character password',
      env: { [email]: 'a@b.co', [password]: 'x'.repeat(12) },
    },
    {
      name: 'admin: password kept untrimmed, e-mail trimmed and lower-cased',
      env: { [email]: ' Admin@Example.COM ', [password]: '  test-admin-password  ' },
    },
    {
      name: 'admin: bad e-mail and short password',
      env: { [email]: 'admin', [password]: 'short' },
    },
  ];
}

function kube(): Case[] {
  const kubeconfig = '<tmp>/kubeconfig';
  const roles = ['api', 'operator', 'all'];
  return [
    ...roles.flatMap((role) =>
      ['local', 'kubernetes'].map((runner) => ({
        name: `role ${role} x runner ${runner} with a kubeconfig`,
        env: { KILN_ROLE: role, KILN_RUNNER: runner, KUBECONFIG: kubeconfig },
      })),
    ),
    ...roles.map((role) => ({
      name: `role ${role} x runner kubernetes without a kubeconfig`,
      env: { KILN_ROLE: role, KILN_RUNNER: 'kubernetes' },
    })),
    ...roles.map((role) => ({
      name: `role ${role} x default runner with a kubeconfig`,
      env: { KILN_ROLE: role, KUBECONFIG: kubeconfig },
    })),
    { name: 'KUBECONFIG: a missing file', env: only('KUBECONFIG', '<tmp>/missing') },
    {
      name: 'KUBECONFIG: the first existing file of a list',
      env: only('KUBECONFIG', `<tmp>/missing::${kubeconfig}:<tmp>/home-kube/.kube/config`),
    },
    { name: 'KUBECONFIG: empty, home has .kube/config', env: only('KUBECONFIG', ''), home: 'kube' },
    { name: 'KUBECONFIG: absent, home has .kube/config', env: {}, home: 'kube' },
    {
      name: 'KUBECONFIG: missing file wins over home .kube/config',
      env: only('KUBECONFIG', '<tmp>/missing'),
      home: 'kube',
    },
    {
      name: 'home .kube/config and runner local',
      env: only('KILN_RUNNER', 'local'),
      home: 'kube',
    },
    {
      name: 'service host set without a service account token',
      env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KILN_RUNNER: 'kubernetes' },
    },
  ];
}

function operatorLease(): Case[] {
  const lease = 'KILN_OPERATOR_LEASE_';
  return [
    {
      name: 'lease: renew deadline equal to duration',
      env: { [`${lease}DURATION_SECONDS`]: '10', [`${lease}RENEW_DEADLINE_SECONDS`]: '10' },
    },
    {
      name: 'lease: retry equal to default renew',
      env: only(`${lease}RETRY_PERIOD_SECONDS`, '10'),
    },
    {
      name: 'lease: short duration against the default deadline',
      env: only(`${lease}DURATION_SECONDS`, '5'),
    },
    {
      name: 'lease: bad renew deadline falls back and then fails the duration check too',
      env: {
        [`${lease}DURATION_SECONDS`]: '5',
        [`${lease}RENEW_DEADLINE_SECONDS`]: 'abc',
        KILN_OPERATOR_WATCH_TIMEOUT_SECONDS: '1',
      },
    },
    {
      name: 'lease: every timing check fails',
      env: {
        [`${lease}DURATION_SECONDS`]: '3',
        [`${lease}RENEW_DEADLINE_SECONDS`]: '3',
        [`${lease}RETRY_PERIOD_SECONDS`]: '3',
      },
    },
    {
      name: 'lease: tight valid timings',
      env: {
        [`${lease}DURATION_SECONDS`]: '3',
        [`${lease}RENEW_DEADLINE_SECONDS`]: '2',
        [`${lease}RETRY_PERIOD_SECONDS`]: '1',
      },
    },
    {
      name: 'lease namespace follows the build namespace',
      env: only('KILN_BUILD_NAMESPACE', 'team-builds'),
    },
    {
      name: 'lease namespace follows an invalid build namespace',
      env: only('KILN_BUILD_NAMESPACE', 'Team'),
    },
    {
      name: 'lease namespace set, build namespace invalid',
      env: { KILN_BUILD_NAMESPACE: 'Team', [`${lease}NAMESPACE`]: 'kiln' },
    },
    {
      name: 'lease namespace follows the build namespace, not a level of its own',
      env: { KILN_BUILD_NAMESPACE: 'team-builds', KILN_BUILD_NAMESPACE_BASELINE: 'team-kaniko' },
    },
  ];
}

function lists(): Case[] {
  const origins = [
    ' https://a.example.com ,, http://b.example.com:8080 ',
    'https://a.example.com/',
    'a.example.com, b.example.com',
    'wss://a.example.com',
    ',',
  ];
  return [
    ...origins.map((value) => ({
      name: `origins ${JSON.stringify(value)}`,
      env: only('KILN_WS_ALLOWED_ORIGINS', value),
    })),
    {
      name: 'insecure registries: blanks and empty entries',
      env: only('KILN_LOCAL_INSECURE_REGISTRIES', ' , a:5000 ,b , '),
    },
  ];
}

function childEnvironment(): Case[] {
  return [
    {
      name: 'child environment: every allowlisted name and prefix',
      env: {
        PATH: '/opt/tools/bin:/usr/bin',
        HOME: '/home/kiln',
        USER: 'kiln',
        LOGNAME: 'kiln',
        LANG: 'C.UTF-8',
        LANGUAGE: 'en',
        TMPDIR: '/tmp/kiln',
        TZ: 'UTC',
        HTTP_PROXY: 'http://proxy:3128',
        http_proxy: 'http://proxy:3128',
        HTTPS_PROXY: 'http://proxy:3128',
        https_proxy: 'http://proxy:3128',
        NO_PROXY: 'localhost',
        no_proxy: 'localhost',
        ALL_PROXY: 'socks5://proxy:1080',
        all_proxy: 'socks5://proxy:1080',
        SSL_CERT_FILE: '/etc/ssl/ca.pem',
        SSL_CERT_DIR: '/etc/ssl/certs',
        GIT_SSL_CAINFO: '/etc/ssl/ca.pem',
        GIT_SSL_CAPATH: '/etc/ssl/certs',
        REGISTRY_AUTH_FILE: '/etc/kiln/auth.json',
        XDG_RUNTIME_DIR: '/run/user/1000',
        XDG_CONFIG_HOME: '/home/kiln/.config',
        DOCKER_HOST: 'unix:///run/docker.sock',
        DOCKER_CONFIG: '/home/kiln/.docker',
        DOCKER_CERT_PATH: '/home/kiln/.docker/certs',
        DOCKER_TLS_VERIFY: '1',
        PACK_HOME: '/home/kiln/.pack',
        CHECKPOINT_DISABLE: '1',
        LC_ALL: 'C',
        CONTAINERS_REGISTRIES_CONF: '/etc/containers/registries.conf',
        PACKER_PLUGIN_PATH: '/opt/packer/plugins',
      },
    },
    {
      name: 'child environment: kiln state, vendor credentials and others never passed',
      env: {
        KILN_HOME: '/srv/kiln',
        kiln_lower: 'x',
        PGPASSWORD: 'test-password',
        pguser: 'kiln',
        DATABASE_URL: VALID['DATABASE_URL']!,
        AWS_ACCESS_KEY_ID: 'test-access-key-id',
        AWS_SECRET_ACCESS_KEY: 'test-secret-access-key',
        AWS_SESSION_TOKEN: 'test-session-token',
        AZURE_CLIENT_ID: 'test-client-id',
        AZURE_CLIENT_SECRET: 'test-client-secret',
        AZURE_TENANT_ID: 'test-tenant-id',
        VAULT_TOKEN: 'test-vault-token',
        KILN_S3_BUCKET: 'test-bucket',
        SHELL: '/bin/bash',
        Path: '/not/the/path',
        lc_all: 'C',
      },
    },
    {
      name: 'child environment: empty values dropped, blanks kept as they are',
      env: { PATH: '', HOME: '  ', TZ: ' UTC ', LC_ALL: '' },
    },
  ];
}

/** Settings that interact or that a deployment sets together. */
function combinations(): Case[] {
  const kubeconfig = '<tmp>/kubeconfig';
  return [
    {
      name: 'operator in a cluster: kubernetes runner, steps, snyk, clair, lease in its namespace',
      env: {
        KILN_ROLE: 'operator',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: kubeconfig,
        KILN_BUILD_NAMESPACE: 'kiln-builds',
        KILN_OPERATOR_LEASE_NAMESPACE: 'kiln',
        KILN_STEP_IMAGE: VALID['KILN_STEP_IMAGE']!,
        KILN_UPLOAD_URL: 'http://kiln.kiln.svc',
        KILN_CLAIR_URL: 'http://clair.kiln.svc:6060',
        KILN_SNYK_TOKEN_SECRET: 'snyk/token',
        KILN_STEP_IMAGE_SNYK: VALID['KILN_STEP_IMAGE_SNYK']!,
        DATABASE_URL: VALID['DATABASE_URL']!,
        KILN_SECRETS_KEY_FILE: '<tmp>/secrets/sealing-key',
      },
    },
    {
      name: 'namespaces by Pod Security level as the chart sets them, buildx off',
      env: {
        KILN_ROLE: 'operator',
        KUBECONFIG: kubeconfig,
        KILN_BUILD_NAMESPACE_RESTRICTED: 'kiln-builds-restricted',
        KILN_BUILD_NAMESPACE_BASELINE: 'kiln-builds',
        KILN_BUILD_ALLOW_PRIVILEGED: 'false',
        KILN_BUILD_USER_NAMESPACES: 'true',
      },
    },
    {
      name: 'privileged pods refused and a privileged namespace named',
      env: { KILN_BUILD_ALLOW_PRIVILEGED: 'false', KILN_BUILD_NAMESPACE_PRIVILEGED: 'buildx' },
    },
    {
      name: 'api in a cluster: external database, secrets from files, vendor timeouts',
      env: {
        KILN_ROLE: 'api',
        KUBECONFIG: kubeconfig,
        DATABASE_URL: VALID['DATABASE_URL']!,
        KILN_JWT_SECRET_FILE: '<tmp>/secrets/jwt-secret',
        KILN_SECRETS_KEY_FILE: '<tmp>/secrets/sealing-key',
        KILN_EXTERNAL_TIMEOUT_MS: '10000',
        KILN_EXTERNAL_ATTEMPTS: '5',
        KILN_TRUST_PROXY_HOPS: '1',
        KILN_WS_ALLOWED_ORIGINS: 'https://console.example.com',
      },
    },
    {
      name: 'all-in-one on a laptop: embedded database, local registry, admin',
      env: {
        KILN_DATA_DIR: 'state',
        KILN_LOCAL_REGISTRY: '127.0.0.1:5000/kiln',
        KILN_LOCAL_INSECURE_REGISTRIES: '127.0.0.1:5000',
        KILN_LOCAL_MAX_PARALLEL: '1',
        KILN_BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
        KILN_BOOTSTRAP_ADMIN_PASSWORD: 'test-admin-password',
        PATH: '/usr/bin',
      },
    },
    {
      name: 'vendor settings: S3 and Azure variables are not kiln configuration',
      env: {
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'test-access-key-id',
        AWS_SECRET_ACCESS_KEY: 'test-secret-access-key',
        AZURE_CLIENT_SECRET: 'test-client-secret',
        KILN_S3_BUCKET: 'test-bucket',
        KILN_EXTERNAL_ATTEMPTS: '0',
      },
    },
    {
      name: 'problems of several concerns: the listed order',
      env: {
        KILN_LOGIN_WINDOW_SECONDS: '0',
        KILN_LOCAL_MAX_PARALLEL: '0',
        KILN_WS_POLL_SECONDS: '0',
        KILN_LIST_EXACT_COUNT_LIMIT: '-1',
        KILN_LOG_PURGE_POLL_SECONDS: '0',
        KILN_ACCESS_CACHE_TTL_MS: 'x',
        KILN_LOGIN_MAX_FAILURES: '0',
        KILN_SECRETS_KEY: 'short',
        KILN_DATA_DIR: 'state',
        DATABASE_URL: 'sqlite://x',
        KILN_ARTIFACT_MAX_BYTES: '1',
        PORT: '0',
        KILN_RUNNER: 'kubernetes',
        KILN_BUILD_NAMESPACE: 'X',
        KILN_STEP_IMAGE: 'x',
        KILN_ROLE: 'x',
        KILN_EXTERNAL_TIMEOUT_MS: '1',
        KILN_BOOTSTRAP_ADMIN_PASSWORD: 'test-admin-password',
      },
    },
  ];
}

const CASES = cases();
const root = mkdtempSync(join(tmpdir(), 'kiln-config-matrix-'));
const cwd = join(root, 'srv');
const homes: Record<Home, string> = { empty: join(root, 'home'), kube: join(root, 'home-kube') };
mkdirSync(cwd);
mkdirSync(homes.empty);
mkdirSync(join(homes.kube, '.kube'), { recursive: true });
writeFileSync(join(homes.kube, '.kube', 'config'), 'apiVersion: v1\nkind: Config\n');
writeFileSync(join(root, 'kubeconfig'), 'apiVersion: v1\nkind: Config\n');
mkdirSync(join(root, 'secrets'));
writeFileSync(join(root, 'secrets', 'jwt-secret'), `test-jwt-secret-from-a-file-0123456789\n`);
writeFileSync(
  join(root, 'secrets', 'sealing-key'),
  `  test-sealing-key-from-a-file-0123456789  \n`,
);
writeFileSync(join(root, 'secrets', 'short'), 'tiny\n');
writeFileSync(join(cwd, 'secret-file'), 'test-secret-in-the-working-directory-0123\n');

/** On a machine in a cluster, KUBERNETES_SERVICE_HOST finds a real service account. */
const IN_CLUSTER = existsSync(SERVICE_ACCOUNT_TOKEN);
const dependsOnCluster = (c: Case) => 'KUBERNETES_SERVICE_HOST' in c.env;

function withRoot(env: Readonly<Record<string, string>>): Env {
  return Object.fromEntries(
    Object.entries(env).map(([name, value]) => [name, value.split('<tmp>').join(root)]),
  );
}

/** What loadConfig made of one case, as JSON with this run's directory written <tmp>. */
function observe(c: Case): Result {
  let outcome: unknown;
  try {
    const config = loadConfig(withRoot(c.env), cwd, homes[c.home ?? 'empty']);
    expect(config).toBeInstanceOf(KilnConfig);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.childEnvironment)).toBe(true);
    outcome = { config };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    expect(error.message.split('\n').slice(1, -1)).toEqual(
      error.problems.map((p) => `  ${p.variable}: ${p.expected}`),
    );
    outcome = { error: error.name, message: error.message.split('\n') };
  }
  const json = JSON.stringify(outcome, (_key, value: unknown) =>
    value === undefined ? UNDEFINED : value,
  );
  return JSON.parse(json.split(root).join('<tmp>')) as Result;
}

function changedFrom(
  defaults: Record<string, unknown>,
  config: Record<string, unknown>,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(config).filter(
      ([key, value]) => JSON.stringify(value) !== JSON.stringify(defaults[key]),
    ),
  );
}

describe('loadConfig over a matrix of environments', () => {
  const recorded: Recorded[] = UPDATE
    ? []
    : (JSON.parse(readFileSync(FIXTURE, 'utf8')) as { cases: Recorded[] }).cases;
  const byName = new Map(recorded.map((r) => [r.name, r]));
  const defaults = (): Record<string, unknown> => {
    const first = UPDATE ? observe(CASES[0]!) : recorded[0]!.result;
    if (!('config' in first)) throw new Error('the first case must be the empty environment');
    return first.config;
  };

  afterAll(() => {
    if (!UPDATE) return;
    if (IN_CLUSTER) throw new Error(`not written: ${SERVICE_ACCOUNT_TOKEN} exists here`);
    const base = defaults();
    const entries = CASES.map((c, i): Recorded => {
      const result = observe(c);
      return {
        ...c,
        result:
          i === 0 || !('config' in result) ? result : { changed: changedFrom(base, result.config) },
      };
    });
    writeFileSync(FIXTURE, JSON.stringify({ cases: entries }));
    // Prettier's API loads its core with import(), which jest's CommonJS mode refuses.
    execFileSync(process.execPath, [
      require.resolve('prettier/bin/prettier.cjs'),
      '--write',
      FIXTURE,
    ]);
  });

  it('holds at least 60 environments, each named once', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(60);
    expect(new Set(CASES.map((c) => c.name)).size).toBe(CASES.length);
  });

  it('sets every variable loadConfig reads in some environment', () => {
    const read = new Set<string>();
    const spy = new Proxy<Env>(
      {},
      {
        get: (_target, name) => {
          if (typeof name === 'string') read.add(name);
          return undefined;
        },
      },
    );
    loadConfig(spy, cwd, homes.empty);

    const set = new Set(CASES.flatMap((c) => Object.keys(c.env)));
    expect([...read].filter((name) => !set.has(name))).toEqual([]);
    expect(read.size).toBeGreaterThan(60);
  });

  if (UPDATE) return;

  it('records exactly the environments of the matrix', () => {
    expect(recorded.map(({ name, env, home }) => ({ name, env, home }))).toEqual(
      CASES.map(({ name, env, home }) => ({ name, env, home })),
    );
  });

  for (const c of CASES) {
    const run = IN_CLUSTER && dependsOnCluster(c) ? it.skip : it;
    run(`gives today's result for: ${c.name}`, () => {
      const expected = byName.get(c.name)?.result;
      if (expected === undefined) throw new Error(`not in the fixture: ${c.name}`);
      const actual = observe(c);

      if ('changed' in expected) {
        expect(actual).toEqual({ config: { ...defaults(), ...expected.changed } });
      } else {
        expect(actual).toEqual(expected);
      }
    });
  }
});
