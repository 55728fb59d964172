import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { JwtSecretSource } from '../config/config.js';

/**
 * A secret kiln is given (a value, a file) or keeps in KILN_DATA_DIR (mode 0600), generated once
 * so it survives a restart: the HMAC key for access tokens, and the key that seals build secrets.
 * Deployments with several replicas give it (KILN_JWT_SECRET(_FILE), KILN_SECRETS_KEY(_FILE)) instead.
 */
export async function resolveSecretSource(source: JwtSecretSource): Promise<string> {
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
