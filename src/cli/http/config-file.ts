import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { UsageError } from './exit-codes.js';

/** What `kiln login` and `kiln tenant use` remember between runs. */
export interface StoredConfig {
  readonly url?: string;
  readonly token?: string;
  /** The tenant's id. */
  readonly tenant?: string;
}

/** `$XDG_CONFIG_HOME/kiln/config.json`, `~/.config/kiln/config.json` without it. */
export function configPath(xdgConfigHome: string | undefined, home: string): string {
  const base =
    xdgConfigHome !== undefined && xdgConfigHome !== '' ? xdgConfigHome : join(home, '.config');
  return join(base, 'kiln', 'config.json');
}

export async function readConfig(path: string): Promise<StoredConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw error;
  }
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error();
    const { url, token, tenant } = value as Record<string, unknown>;
    return {
      ...(typeof url === 'string' ? { url } : {}),
      ...(typeof token === 'string' ? { token } : {}),
      ...(typeof tenant === 'string' ? { tenant } : {}),
    };
  } catch {
    throw new UsageError(`${path} is not kiln's configuration: remove it and run kiln login`);
  }
}

/**
 * Writes the file readable by its owner only (0600, in a 0700 directory): it holds a bearer
 * token. Written beside and renamed, so a reader never sees half a file.
 */
export async function writeConfig(path: string, config: StoredConfig): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const partial = `${path}.${process.pid}.tmp`;
  await writeFile(partial, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await chmod(partial, 0o600);
  await rename(partial, path);
}
