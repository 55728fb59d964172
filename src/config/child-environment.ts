import type { Env } from './reader.js';

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
export function childEnvironmentOf(env: Env): Readonly<Record<string, string>> {
  const inherited: Record<string, string> = { PATH: DEFAULT_PATH };
  for (const [name, raw] of Object.entries(env)) {
    if (raw === undefined || raw === '' || KILN_STATE.test(name)) continue;
    if (CHILD_VARIABLES.has(name) || CHILD_PREFIXES.some((prefix) => name.startsWith(prefix)))
      inherited[name] = raw;
  }
  return Object.freeze(inherited);
}
