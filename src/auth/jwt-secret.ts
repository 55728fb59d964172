import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { JwtSecretSource } from '../config/config.js';

/**
 * The HMAC key for access tokens. A generated one is kept in KILN_DATA_DIR (mode 0600) so tokens
 * survive a restart; deployments with several replicas set KILN_JWT_SECRET(_FILE) instead.
 */
export async function resolveJwtSecret(source: JwtSecretSource): Promise<string> {
  switch (source.kind) {
    case 'value':
    case 'file':
      return source.secret;
    case 'generated': {
      try {
        const existing = (await readFile(source.path, 'utf8')).trim();
        if (existing.length >= 32) return existing;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      const secret = randomBytes(48).toString('base64url');
      await mkdir(dirname(source.path), { recursive: true, mode: 0o700 });
      await writeFile(source.path, `${secret}\n`, { mode: 0o600, flag: 'w' });
      return secret;
    }
  }
}
