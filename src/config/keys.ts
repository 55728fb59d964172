import { readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { EnvReader } from './reader.js';

/** Where the JWT signing secret comes from; `generated` means kiln keeps one in KILN_DATA_DIR. */
export type JwtSecretSource =
  | { kind: 'value'; secret: string }
  | { kind: 'file'; path: string; secret: string }
  | { kind: 'generated'; path: string };

const MIN_SECRET_BYTES = 32;

/**
 * kiln's two keys: the JWT signing secret and the key build secrets are sealed with, each from
 * its variable, from the file its `_FILE` variable names, or generated under the data directory.
 */
export function readKeys(read: EnvReader, dataDir: string, cwd: string) {
  return {
    jwtSecret: readKey(read, 'KILN_JWT_SECRET', cwd, join(dataDir, 'jwt-secret')),
    secretsKey: readKey(read, 'KILN_SECRETS_KEY', cwd, join(dataDir, 'secrets-key')),
  };
}

function readKey(
  read: EnvReader,
  variable: string,
  cwd: string,
  generated: string,
): JwtSecretSource {
  const secret = read.value(variable);
  const file = read.value(`${variable}_FILE`);
  if (secret !== undefined && file !== undefined) {
    read.bad(variable, `set either ${variable} or ${variable}_FILE, not both`);
  } else if (secret !== undefined) {
    if (Buffer.byteLength(secret) >= MIN_SECRET_BYTES) return { kind: 'value', secret };
    read.bad(variable, `at least ${MIN_SECRET_BYTES} bytes`);
  } else if (file !== undefined) {
    const path = isAbsolute(file) ? file : resolve(cwd, file);
    let content: string;
    try {
      content = readFileSync(path, 'utf8').trim();
    } catch {
      read.bad(`${variable}_FILE`, `a readable file, cannot read ${path}`);
      return { kind: 'generated', path: generated };
    }
    if (Buffer.byteLength(content) >= MIN_SECRET_BYTES)
      return { kind: 'file', path, secret: content };
    read.bad(
      `${variable}_FILE`,
      `a file holding at least ${MIN_SECRET_BYTES} bytes, ${path} is shorter`,
    );
  }
  return { kind: 'generated', path: generated };
}
