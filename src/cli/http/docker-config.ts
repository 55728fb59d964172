import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from './exit-codes.js';
import { fieldOf, type Credentials } from './registry.js';

/** What the CLI reads of its environment to find docker's configuration. */
export interface DockerEnvironment {
  readonly DOCKER_CONFIG?: string | undefined;
  readonly HOME: string;
}

/** Names `docker login` may have stored Docker Hub's credentials under. */
const DOCKER_HUB = ['docker.io', 'index.docker.io', 'registry-1.docker.io'];

/** Docker's configuration file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. */
export function dockerConfigPath(env: DockerEnvironment): string {
  const dir = env.DOCKER_CONFIG?.trim();
  return join(dir === undefined || dir === '' ? join(env.HOME, '.docker') : dir, 'config.json');
}

/**
 * The credentials `docker login` stored for `host` in the file's `auths`: an `auth` of base64
 * `user:password`, or `username` and `password`. None when the file or the entry is missing.
 * Credential helpers (`credsStore`, `credHelpers`) are not run. Messages name the file and
 * never quote it.
 */
export async function dockerCredentials(
  path: string,
  host: string,
): Promise<Credentials | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new UsageError(`${path} cannot be read (${(error as NodeJS.ErrnoException).code})`);
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    throw new UsageError(`${path} is not JSON`);
  }
  const auths = fieldOf(config, 'auths');
  const names = host === 'docker.io' ? DOCKER_HUB : [host.toLowerCase()];
  for (const [key, entry] of Object.entries(
    typeof auths === 'object' && auths !== null ? auths : {},
  )) {
    // Keys are written as `host`, `https://host` or `https://host/v1/`.
    const keyHost = key
      .replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
      .split('/')[0]!
      .toLowerCase();
    if (!names.includes(keyHost)) continue;
    const found = credentialsOf(entry);
    if (found !== undefined) return found;
  }
  return undefined;
}

function credentialsOf(entry: unknown): Credentials | undefined {
  const auth = fieldOf(entry, 'auth');
  if (typeof auth === 'string' && auth !== '') {
    const pair = Buffer.from(auth, 'base64').toString('utf8');
    const colon = pair.indexOf(':');
    if (colon > 0) return { username: pair.slice(0, colon), password: pair.slice(colon + 1) };
  }
  const [username, password] = [fieldOf(entry, 'username'), fieldOf(entry, 'password')];
  return typeof username === 'string' && username !== '' && typeof password === 'string'
    ? { username, password }
    : undefined;
}
