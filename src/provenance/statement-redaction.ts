/*
 * What of a build's request may appear in its provenance, which is signed, attached to the image
 * and readable by whoever can pull it: every value the request holds, except secret values.
 *
 * Where a manifest holds secrets (src/manifest/types.ts, src/build-methods/manifest.ts):
 * - `build_config.secrets` (buildx): every value is a secret, stored sealed (`kiln-sealed:v1:…`,
 *   docs/adr/0020-sealed-build-secrets.md) or, in a Build resource, as written;
 * - `environment`, `build_args`, `paketo_config.env` and `.build_args`, packer `variables`: maps of
 *   named values, where a secret reference (docs/adr/0021-secret-references.md) may stand and a
 *   plain value is a secret when its name says so (NPM_TOKEN, db_password, AWS_SECRET_ACCESS_KEY);
 * - packer `builders`, `provisioners`, `post_processors`, `metadata`, and the packer template
 *   itself, whose attributes may carry credentials (`secret_key`, `ssh_password`) and whose
 *   variables a template declares sensitive (`sensitive-variables`, `sensitive = true`).
 * A secret reference names where a secret is kept, not the secret, so it stays as written. A
 * sealed value, or a plain value where a secret is kept, becomes REDACTED. A URL loses its
 * credentials wherever it stands. Dockerfiles and instructions are kept as written: what they
 * hold is written into the image anyway.
 */
import { isSecretReference } from '../manifest/secret-reference.js';
import { isPlainObject } from '../manifest/fields.js';
import { SEALED_PREFIX } from '../secrets/secret-sealer.js';
import { withoutCredentials } from '../common/url-credentials.js';

/** What stands where a secret value was. */
export const REDACTED = '[redacted]';

/** A JSON value as a statement holds it. */
export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Nouns that make a name a secret's: `NPM_TOKEN`, `client_secret`, `dbPassword`, `API_KEY`. */
const SECRET_WORDS = new Set([
  'password',
  'passwd',
  'passphrase',
  'pwd',
  'secret',
  'secrets',
  'token',
  'tokens',
  'credential',
  'credentials',
  'key',
  'apikey',
  'accesskey',
  'secretkey',
  'privatekey',
  'auth',
  'pat',
]);

/**
 * Last words that make such a name a secret's description rather than the secret:
 * `secret_manager_type`, `kms_key_id`, `TOKEN_URL`, `ssh_private_key_file`.
 */
const DESCRIBING_WORDS = new Set([
  'type',
  'name',
  'id',
  'ids',
  'url',
  'uri',
  'file',
  'path',
  'dir',
  'ref',
  'reference',
  'manager',
  'arn',
  'endpoint',
  'length',
  'ttl',
  'expiry',
  'region',
  'version',
  'header',
  'kind',
  'policy',
]);

/** True when a field or variable named `name` holds a secret by its name. */
export function isSecretName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
  const last = words.at(-1);
  if (last === undefined || DESCRIBING_WORDS.has(last)) return false;
  return words.some((word) => SECRET_WORDS.has(word));
}

/**
 * A value that is one template expression and nothing else (packer's `{{user \`x\`}}`, HCL's
 * `${var.x}`) names where a value comes from, not the value.
 */
function isExpression(value: string): boolean {
  return /^\s*(\{\{[^{}]*\}\}|\$\{[^{}]*\})\s*$/.test(value);
}

/** A string as a statement may show it, `secret` when it stands where a secret is kept. */
export function redactString(value: string, secret: boolean): string {
  if (isSecretReference(value)) return value;
  if (value.startsWith(SEALED_PREFIX)) return REDACTED;
  if (secret && !isExpression(value)) return REDACTED;
  return withoutCredentials(value);
}

/**
 * `value` with every secret value replaced: with `secret`, or below a key named like a secret,
 * every string is one. Anything JSON cannot hold becomes null.
 */
export function redactJson(value: unknown, secret = false): JsonValue {
  if (typeof value === 'string') return redactString(value, secret);
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'boolean' || value === null || value === undefined) return value ?? null;
  if (Array.isArray(value)) return value.map((item: unknown) => redactJson(item, secret));
  if (!isPlainObject(value)) return null;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .map(([key, item]) => [key, redactJson(item, secret || isSecretName(key))]),
  );
}

/** A map of named values (environment, build args, packer variables), each redacted by its name. */
export function redactNamed(
  values: Readonly<Record<string, unknown>> | null | undefined,
  sensitive: ReadonlySet<string> = new Set(),
): JsonValue {
  if (values === null || values === undefined) return null;
  return Object.fromEntries(
    Object.entries(values).map(([name, value]) => [
      name,
      redactJson(value, sensitive.has(name) || isSecretName(name)),
    ]),
  );
}

/**
 * A packer template as a statement may show it, and the variables it declares sensitive. A JSON
 * template is read and written back only when something in it was redacted, so a template
 * without secrets stays byte for byte as submitted. An HCL2 template is text to kiln here (its
 * parser is asynchronous): string literals of attributes named like a secret, and every literal
 * inside a `variable` block marked `sensitive = true`, are replaced in place.
 */
export function redactPackerTemplate(template: string): {
  template: string;
  sensitive: ReadonlySet<string>;
} {
  if (template.trimStart().startsWith('{')) return redactJsonTemplate(template);
  return redactHclTemplate(template);
}

function redactJsonTemplate(text: string): { template: string; sensitive: ReadonlySet<string> } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON after all (kiln refuses such a template at create): shown as HCL text would be.
    return redactHclTemplate(text);
  }
  if (!isPlainObject(parsed)) return { template: text, sensitive: new Set() };
  const listed = parsed['sensitive-variables'];
  const sensitive = new Set(
    Array.isArray(listed) ? listed.filter((name) => typeof name === 'string') : [],
  );
  const redacted = Object.fromEntries(
    Object.entries(parsed).map(([key, value]) => [
      key,
      key === 'variables' && isPlainObject(value)
        ? redactNamed(value, sensitive)
        : redactJson(value, isSecretName(key)),
    ]),
  );
  const changed = JSON.stringify(redacted) !== JSON.stringify(parsed);
  return { template: changed ? JSON.stringify(redacted, null, 2) : text, sensitive };
}

const HCL_STRING = /"(?:[^"\\\n]|\\.)*"/g;
const HCL_HEREDOC = /<<-?([A-Za-z_][\w-]*)\r?\n[\s\S]*?\n[ \t]*\1(?=\r?\n|$)/g;
const HCL_ATTRIBUTE = /^([ \t]*)([A-Za-z_][\w-]*)([ \t]*=[ \t]*)("(?:[^"\\\n]|\\.)*")/gm;
const HCL_VARIABLE = /\bvariable\s+"([^"\n]+)"\s*\{/g;

function redactHclTemplate(text: string): { template: string; sensitive: ReadonlySet<string> } {
  const sensitive = new Set<string>();
  const blocks: Array<{ start: number; end: number }> = [];
  for (const match of text.matchAll(HCL_VARIABLE)) {
    const open = match.index + match[0].length - 1;
    const end = closingBrace(text, open);
    if (/^\s*sensitive\s*=\s*true\b/m.test(text.slice(open + 1, end))) {
      sensitive.add(match[1]!);
      blocks.push({ start: open + 1, end });
    }
  }
  let result = '';
  let at = 0;
  for (const block of blocks) {
    result += redactHclAttributes(text.slice(at, block.start));
    result += text
      .slice(block.start, block.end)
      .replace(HCL_HEREDOC, `"${REDACTED}"`)
      .replace(HCL_STRING, `"${REDACTED}"`);
    at = block.end;
  }
  result += redactHclAttributes(text.slice(at));
  return { template: result, sensitive };
}

/** `secret_key = "literal"` → `secret_key = "[redacted]"`; `"${var.x}"` and references stay. */
function redactHclAttributes(text: string): string {
  return text.replace(
    HCL_ATTRIBUTE,
    (whole, indent: string, name: string, equals: string, literal: string) => {
      if (!isSecretName(name)) return whole;
      const value = hclLiteral(literal);
      const shown = redactString(value, true);
      return shown === value ? whole : `${indent}${name}${equals}"${shown}"`;
    },
  );
}

/** The text of a quoted HCL literal; its escapes are JSON's but for a few JSON refuses. */
function hclLiteral(literal: string): string {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return literal.slice(1, -1);
  }
}

/** The index of the `}` closing the block opened at `open`, skipping strings and comments. */
function closingBrace(text: string, open: number): number {
  let depth = 0;
  for (let index = open; index < text.length; index += 1) {
    const char = text[index];
    if (char === '"') {
      index += 1;
      while (index < text.length && text[index] !== '"' && text[index] !== '\n') {
        if (text[index] === '\\') index += 1;
        index += 1;
      }
    } else if (char === '#' || (char === '/' && text[index + 1] === '/')) {
      while (index < text.length && text[index] !== '\n') index += 1;
    } else if (char === '{') {
      depth += 1;
    } else if (char === '}') {
      depth -= 1;
      if (depth === 0) return index;
    }
  }
  return text.length;
}
