import { isPlainObject } from '../manifest/fields.js';
import { carriesCredentials, credentialsInUrlProblem } from '../common/url-credentials.js';
import type { RegistryType, SecretManagerType } from '../manifest/types.js';
import type { RegistrySettingsByType } from '../registries/settings.js';
import { isSecretReference, parseSecretReference } from '../manifest/secret-reference.js';
import type { SecretManagerSettingsByType } from '../secret-managers/settings.js';

/**
 * Reads the settings an admin gives for a tenant's secret manager or registry (JSON), keyed
 * problems in `details` (`settings.address`). Pure. Settings name files and references, never a
 * credential: a plain password is refused.
 */
type Details = Record<string, string>;
type Read<T> = { settings: T } | { details: Details };

const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$/;
const ABSOLUTE_PATH = /^\/[^\0]*$/;

/** One object's fields, read with their problems recorded under `<prefix>.<field>`. */
class Fields {
  constructor(
    private readonly value: Record<string, unknown>,
    readonly details: Details = {},
    private readonly prefix = 'settings',
  ) {}

  allow(keys: readonly string[]): void {
    for (const key of Object.keys(this.value)) {
      if (!keys.includes(key)) this.details[this.at(key)] = 'is not a setting of this type';
    }
  }

  string(key: string, rule?: Rule): string | undefined {
    const value = this.value[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || value.trim() === '') {
      this.details[this.at(key)] = 'must be a non-empty string';
      return undefined;
    }
    if (rule !== undefined && !rule.test(value)) {
      this.details[this.at(key)] = rule.says;
      return undefined;
    }
    return value;
  }

  /** A URL (`rule`) without credentials; `instead` says where its credentials go. */
  url(key: string, rule: Rule, instead: string, required = false): string | undefined {
    const value = required ? this.required(key, rule) : this.string(key, rule);
    if (value !== undefined && carriesCredentials(value)) {
      this.details[this.at(key)] = credentialsInUrlProblem(instead);
      return undefined;
    }
    return value;
  }

  required(key: string, rule?: Rule): string | undefined {
    if (this.value[key] === undefined) {
      this.details[this.at(key)] = 'is required';
      return undefined;
    }
    return this.string(key, rule);
  }

  boolean(key: string): boolean | undefined {
    const value = this.value[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'boolean') this.details[this.at(key)] = 'must be true or false';
    return typeof value === 'boolean' ? value : undefined;
  }

  /** Only one of `keys` present: either both or neither. */
  together(first: string, second: string): void {
    if ((this.value[first] === undefined) !== (this.value[second] === undefined)) {
      this.details[this.at(second)] ??= `${first} and ${second} go together`;
    }
  }

  object(key: string): Fields | undefined {
    const value = this.value[key];
    if (!isPlainObject(value)) {
      this.details[this.at(key)] = value === undefined ? 'is required' : 'must be an object';
      return undefined;
    }
    return new Fields(value, this.details, this.at(key));
  }

  private at(key: string): string {
    return `${this.prefix}.${key}`;
  }
}

interface Rule {
  test(text: string): boolean;
  says: string;
}

const URL_RULE: Rule = {
  test: (text: string) => /^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(text),
  says: 'must be an http(s) URL',
};
const HTTPS_RULE: Rule = {
  test: (text: string) => /^https:\/\/[^\s/]+\/?$/.test(text),
  says: 'must be an https URL with no path',
};
const FILE_RULE: Rule = {
  test: (text: string) => ABSOLUTE_PATH.test(text),
  says: 'must be an absolute file path',
};
const REFERENCE_RULE: Rule = {
  test: (text: string) => isSecretReference(text) && 'reference' in parseSecretReference(text),
  says: 'must be a secret reference (vault:…, aws:… or azure:…): kiln stores no credential',
};
const USERNAME_RULE: Rule = {
  test: (text: string) => !isSecretReference(text) || 'reference' in parseSecretReference(text),
  says: 'is written as a secret reference but does not parse',
};

export function readSecretManagerSettings<T extends SecretManagerType>(
  type: T,
  input: unknown,
): Read<SecretManagerSettingsByType[T]> {
  if (!isPlainObject(input)) return { details: { settings: 'must be a JSON object' } };
  const fields = new Fields(input);
  let settings: object;
  switch (type) {
    case 'vault': {
      fields.allow(['address', 'namespace', 'auth', 'caFile']);
      const auth = fields.object('auth');
      const method = auth?.required('method', {
        test: (m) => m === 'token' || m === 'kubernetes',
        says: 'must be token or kubernetes',
      });
      let authSettings: object = {};
      if (auth !== undefined && method === 'token') {
        auth.allow(['method', 'tokenFile']);
        authSettings = { method, tokenFile: auth.required('tokenFile', FILE_RULE) };
      } else if (auth !== undefined && method === 'kubernetes') {
        auth.allow(['method', 'role', 'mount', 'jwtFile']);
        authSettings = {
          method,
          role: auth.required('role'),
          mount: auth.string('mount'),
          jwtFile: auth.string('jwtFile', FILE_RULE),
        };
      }
      settings = {
        address: fields.url(
          'address',
          URL_RULE,
          'auth (a token file, or kubernetes auth with a role)',
          true,
        ),
        namespace: fields.string('namespace'),
        auth: withoutUndefined(authSettings),
        caFile: fields.string('caFile', FILE_RULE),
      };
      break;
    }
    case 'aws_secretsmanager':
      fields.allow(['region', 'endpoint', 'credentialsFile', 'profile']);
      settings = {
        region: fields.required('region', {
          test: (r) => /^[a-z0-9-]+$/.test(r),
          says: 'must be an AWS region such as eu-west-1',
        }),
        endpoint: fields.url('endpoint', URL_RULE, 'credentialsFile or profile'),
        credentialsFile: fields.string('credentialsFile', FILE_RULE),
        profile: fields.string('profile'),
      };
      break;
    default:
      fields.allow([
        'vaultUrl',
        'tenantId',
        'clientId',
        'federatedTokenFile',
        'authorityHost',
        'caFile',
      ]);
      settings = {
        vaultUrl: fields.url(
          'vaultUrl',
          HTTPS_RULE,
          'a workload identity (federatedTokenFile)',
          true,
        ),
        tenantId: fields.string('tenantId'),
        clientId: fields.string('clientId'),
        federatedTokenFile: fields.string('federatedTokenFile', FILE_RULE),
        authorityHost: fields.url(
          'authorityHost',
          URL_RULE,
          'a workload identity (federatedTokenFile)',
        ),
        caFile: fields.string('caFile', FILE_RULE),
      };
  }
  if (Object.keys(fields.details).length > 0) return { details: fields.details };
  return { settings: withoutUndefined(settings) as SecretManagerSettingsByType[T] };
}

export function readRegistrySettings<T extends RegistryType>(
  type: T,
  input: unknown,
): Read<RegistrySettingsByType[T]> {
  if (!isPlainObject(input)) return { details: { settings: 'must be a JSON object' } };
  const fields = new Fields(input);
  let settings: object;
  if (type === 's3') {
    fields.allow([
      'bucket',
      'prefix',
      'region',
      'endpoint',
      'forcePathStyle',
      'accessKeyId',
      'secretAccessKey',
    ]);
    settings = {
      bucket: fields.required('bucket', {
        test: (b) => /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b),
        says: 'must be an S3 bucket name',
      }),
      prefix: fields.string('prefix', {
        // The segments s3ImageKey accepts: safe in every S3-compatible store.
        test: (p) => p.split('/').every((segment) => /^[A-Za-z0-9._-]+$/.test(segment)),
        says: 'must be /-separated segments of A-Z a-z 0-9 . _ - (no leading or trailing /)',
      }),
      region: fields.required('region', {
        test: (r) => /^[a-z0-9-]+$/.test(r),
        says: 'must be an AWS region such as eu-west-1',
      }),
      endpoint: fields.url(
        'endpoint',
        URL_RULE,
        'accessKeyId and secretAccessKey (a secret reference)',
      ),
      forcePathStyle: fields.boolean('forcePathStyle'),
      accessKeyId: fields.string('accessKeyId', USERNAME_RULE),
      secretAccessKey: fields.string('secretAccessKey', REFERENCE_RULE),
    };
    fields.together('accessKeyId', 'secretAccessKey');
  } else {
    fields.allow(['address', 'namespace', 'insecure', 'username', 'password']);
    settings = {
      address: fields.required('address', {
        test: (h) => HOST.test(h),
        says: 'must be host[:port], no scheme',
      }),
      namespace: fields.string('namespace', {
        test: (n) => /^[a-z0-9][a-z0-9._-]*$/.test(n),
        says: 'must be lowercase letters, digits and . _ -',
      }),
      insecure: fields.boolean('insecure'),
      username: fields.string('username', USERNAME_RULE),
      password: fields.string('password', REFERENCE_RULE),
    };
    fields.together('username', 'password');
  }
  if (Object.keys(fields.details).length > 0) return { details: fields.details };
  return { settings: withoutUndefined(settings) as RegistrySettingsByType[T] };
}

function withoutUndefined(value: object): object {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}
