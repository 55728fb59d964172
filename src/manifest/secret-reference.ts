import type { SecretManagerType } from './types.js';

/**
 * The grammar of secret references (docs/adr/0021-secret-references.md). Pure: text in, a parsed
 * reference or a problem out. A value is a reference when it starts with a manager's scheme;
 * anything else is a plain value.
 *
 *   vault:<mount>/data/<path>[?version=<n>]#<key>   a key of a KV v2 secret (Vault's API path)
 *   aws:<secret name or ARN>[#<json key>]            the SecretString, or one key of its JSON
 *   azure:<secret name>[/<version>][#<json key>]     the value, or one key of its JSON
 */

/** A reference as written (`text`) and read by parseSecretReference; `manager` selects the adapter. */
export type SecretReference = VaultReference | AwsReference | AzureReference;

/** `vault:<mount>/data/<path>#<key>`: a key of a KV v2 secret, optionally `?version=N`. */
export interface VaultReference {
  readonly manager: 'vault';
  readonly text: string;
  /** The KV v2 secrets engine's mount path, e.g. `kv` or `secret/team`. */
  readonly mount: string;
  /** The secret's path under the mount (after `/data/`). */
  readonly path: string;
  readonly key: string;
  readonly version?: number;
}

/** `aws:<secret id or ARN>[#<json key>]`: the SecretString, or one key of it as JSON. */
export interface AwsReference {
  readonly manager: 'aws_secretsmanager';
  readonly text: string;
  readonly secretId: string;
  readonly key?: string;
}

/** `azure:<secret name>[/<version>][#<json key>]`. */
export interface AzureReference {
  readonly manager: 'azure_keyvault';
  readonly text: string;
  readonly name: string;
  readonly version?: string;
  readonly key?: string;
}

export const REFERENCE_SCHEMES: Readonly<Record<string, SecretManagerType>> = {
  vault: 'vault',
  aws: 'aws_secretsmanager',
  azure: 'azure_keyvault',
};

/** The scheme a manager's references start with (`vault`, `aws`, `azure`). */
export function schemeOf(manager: SecretManagerType): string {
  return Object.entries(REFERENCE_SCHEMES).find(([, type]) => type === manager)![0];
}

const SCHEME = /^(vault|aws|azure):/;
const MAX_REFERENCE = 1024;

// A Vault path segment: what Vault's own API accepts in a KV path, minus what would need escaping.
const VAULT_SEGMENT = /^[A-Za-z0-9_.@=+-]+$/;
const JSON_KEY = /^[^\s#]{1,256}$/;
// Secrets Manager: a name is 1-512 of [A-Za-z0-9/_+=.@-]; an ARN names one in a region and account.
const AWS_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
const AWS_ARN =
  /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$/;
// Key Vault: names are 1-127 alphanumerics and dashes; versions are 32 lowercase hex digits.
const AZURE_NAME = /^[0-9A-Za-z-]{1,127}$/;
const AZURE_VERSION = /^[0-9a-f]{32}$/;

/** True when `value` is written as a reference (whether or not it then parses). */
export function isSecretReference(value: string): boolean {
  return SCHEME.test(value);
}

export type ParsedReference = { reference: SecretReference } | { problem: string };

/** Reads a reference; `problem` says what is wrong in words a user can act on. */
export function parseSecretReference(text: string): ParsedReference {
  const scheme = SCHEME.exec(text)?.[1];
  if (scheme === undefined) {
    return { problem: 'is not a secret reference (vault:…, aws:… or azure:…)' };
  }
  if (text.length > MAX_REFERENCE) {
    return { problem: `a secret reference is at most ${MAX_REFERENCE} characters` };
  }
  const body = text.slice(scheme.length + 1);
  switch (scheme) {
    case 'vault':
      return vaultReference(text, body);
    case 'aws':
      return awsReference(text, body);
    default:
      return azureReference(text, body);
  }
}

/** `<mount>/data/<path>[?version=N]#<key>`. */
function vaultReference(text: string, body: string): ParsedReference {
  const usage = 'a Vault reference is vault:<mount>/data/<path>#<key> (KV version 2)';
  const [locator = '', key, ...extra] = body.split('#');
  if (key === undefined || extra.length > 0 || !JSON_KEY.test(key)) {
    return { problem: `${usage}: name one key after a single #` };
  }
  const [path = '', query, ...more] = locator.split('?');
  let version: number | undefined;
  if (query !== undefined || more.length > 0) {
    const match = /^version=([1-9]\d{0,9})$/.exec(query ?? '');
    if (match === null || more.length > 0) {
      return { problem: `${usage}: the only query is ?version=<positive number>` };
    }
    version = Number(match[1]);
  }
  const segments = path.split('/');
  const data = segments.indexOf('data');
  if (data < 1 || data === segments.length - 1) {
    return { problem: `${usage}: the path has no /data/ between the mount and the secret` };
  }
  if (!segments.every((segment) => VAULT_SEGMENT.test(segment))) {
    return { problem: `${usage}: path segments are letters, digits and _ . @ = + -` };
  }
  return {
    reference: {
      manager: 'vault',
      text,
      mount: segments.slice(0, data).join('/'),
      path: segments.slice(data + 1).join('/'),
      key,
      ...(version === undefined ? {} : { version }),
    },
  };
}

/** `<name or ARN>[#<json key>]`. */
function awsReference(text: string, body: string): ParsedReference {
  const usage = 'an AWS reference is aws:<secret name or ARN>[#<json key>]';
  const [secretId = '', key, ...extra] = body.split('#');
  if (extra.length > 0 || (key !== undefined && !JSON_KEY.test(key))) {
    return { problem: `${usage}: at most one #, followed by a key` };
  }
  if (!(AWS_ARN.test(secretId) || (AWS_NAME.test(secretId) && !secretId.startsWith('arn:')))) {
    return { problem: `${usage}: a name is 1-512 of A-Z a-z 0-9 / _ + = . @ -` };
  }
  return {
    reference: {
      manager: 'aws_secretsmanager',
      text,
      secretId,
      ...(key === undefined ? {} : { key }),
    },
  };
}

/** `<name>[/<version>][#<json key>]`. */
function azureReference(text: string, body: string): ParsedReference {
  const usage = 'an Azure reference is azure:<secret name>[/<version>][#<json key>]';
  const [locator = '', key, ...extra] = body.split('#');
  if (extra.length > 0 || (key !== undefined && !JSON_KEY.test(key))) {
    return { problem: `${usage}: at most one #, followed by a key` };
  }
  const [name = '', version, ...more] = locator.split('/');
  if (!AZURE_NAME.test(name)) {
    return { problem: `${usage}: a name is 1-127 letters, digits and dashes` };
  }
  if (more.length > 0 || (version !== undefined && !AZURE_VERSION.test(version))) {
    return { problem: `${usage}: a version is 32 lowercase hexadecimal digits` };
  }
  return {
    reference: {
      manager: 'azure_keyvault',
      text,
      name,
      ...(version === undefined ? {} : { version }),
      ...(key === undefined ? {} : { key }),
    },
  };
}

/**
 * The problem with `value` as a value of a build whose manager is `manager`, if any: a plain
 * value has none; a reference must parse and name that manager.
 */
export function secretValueProblem(value: string, manager: SecretManagerType): string | undefined {
  if (!isSecretReference(value)) return undefined;
  const parsed = parseSecretReference(value);
  if ('problem' in parsed) return parsed.problem;
  if (parsed.reference.manager !== manager) {
    return `references ${parsed.reference.manager}, but this build's secret_manager_type is ${manager}`;
  }
  return undefined;
}
