import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * AWS Signature Version 4 for fake AWS servers: the verifier a fake runs on every request, and
 * the signer its own wire spec uses to talk to it without an SDK. Both follow
 * https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html (canonical request,
 * string to sign, signing key) for the `Authorization` header form only (no presigned URLs).
 */

const ALGORITHM = 'AWS4-HMAC-SHA256';
/** AWS accepts a request whose date is at most this far from its own clock, either way. */
const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;
/** Payload hashes that stand for the body rather than hash it (S3 only). */
const LITERAL_PAYLOAD_HASHES = /^(UNSIGNED-PAYLOAD|STREAMING-.*)$/;

/** A request as it arrived: raw path and query as on the wire, lowercase header names. */
export interface SigV4Request {
  readonly method: string;
  /** URI-encoded once, as sent, without the query. */
  readonly path: string;
  /** As sent, without the leading `?`; empty when there is none. */
  readonly query: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Hex SHA-256 of the body as received. */
  readonly bodySha256: string;
}

export interface SigV4VerifyOptions {
  readonly region: string;
  readonly service: string;
  /** The secret access key of a known access key id, or undefined for an unknown one. */
  readonly secretKeyFor: (accessKeyId: string) => string | undefined;
  /** The server's clock; default now. */
  readonly now?: Date;
  /**
   * Encode the path a second time for the canonical URI, as every service but S3 does (the
   * SDK's `signingEscapePath`); S3 signs the path as sent. Default true.
   */
  readonly uriEscapePath?: boolean;
}

/** Why a request was refused; each maps to the error the real service answers. */
export type SigV4Failure =
  /** No Authorization header. */
  | 'missing'
  /** An Authorization header, or its date, that cannot be parsed. */
  | 'malformed'
  /** The access key id is not one the server knows. */
  | 'unknown-key'
  /** The request date is more than 15 minutes from the server's clock. */
  | 'expired'
  /** The credential scope names another date, region or service. */
  | 'scope'
  /** The signature does not match (wrong secret key, or the request changed after signing). */
  | 'mismatch';

export type SigV4Verdict =
  | { readonly ok: true; readonly accessKeyId: string }
  | { readonly ok: false; readonly reason: SigV4Failure; readonly message: string };

export interface SigV4Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

export const hexSha256 = (data: string | Uint8Array): string =>
  createHash('sha256').update(data).digest('hex');

const hmac = (key: string | Buffer, data: string): Buffer =>
  createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
const uriEncode = (value: string): string =>
  encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );

/** `20150830T123600Z`. */
export const amzDate = (date: Date): string =>
  date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');

/** The key a date, region and service derive from a secret access key. */
export function signingKey(
  secretAccessKey: string,
  date: string,
  region: string,
  service: string,
): Buffer {
  const dateKey = hmac(`AWS4${secretAccessKey}`, date);
  return hmac(hmac(hmac(dateKey, region), service), 'aws4_request');
}

/** The canonical URI: the path normalised and, unless S3, encoded once more. */
function canonicalUri(path: string, uriEscapePath: boolean): string {
  if (!uriEscapePath) return path || '/';
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const trailing = segments.length > 0 && path.endsWith('/') ? '/' : '';
  return `/${segments.map(uriEncode).join('/')}${trailing}`;
}

/** Query parameters decoded, re-encoded the SigV4 way and sorted by name, then value. */
function canonicalQuery(query: string): string {
  if (query === '') return '';
  return query
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const at = pair.indexOf('=');
      const name = at < 0 ? pair : pair.slice(0, at);
      const value = at < 0 ? '' : pair.slice(at + 1);
      const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, '%20'));
      return [uriEncode(decode(name)), uriEncode(decode(value))] as const;
    })
    .sort(([a, x], [b, y]) => (a === b ? compare(x, y) : compare(a, b)))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

const headerValue = (value: string | string[] | undefined): string =>
  (Array.isArray(value) ? value.join(',') : (value ?? '')).trim().replace(/\s+/g, ' ');

/** The canonical request of SigV4 for the named (lowercase, sorted) signed headers. */
export function canonicalRequest(
  request: Omit<SigV4Request, 'bodySha256'>,
  signedHeaders: readonly string[],
  payloadHash: string,
  uriEscapePath = true,
): string {
  return [
    request.method.toUpperCase(),
    canonicalUri(request.path, uriEscapePath),
    canonicalQuery(request.query),
    ...signedHeaders.map((name) => `${name}:${headerValue(request.headers[name])}`),
    '',
    signedHeaders.join(';'),
    payloadHash,
  ].join('\n');
}

export function stringToSign(date: string, scope: string, canonical: string): string {
  return [ALGORITHM, date, scope, hexSha256(canonical)].join('\n');
}

/** What the payload hash of the canonical request is: the header when sent, else the body's. */
function payloadHashOf(request: SigV4Request): string {
  const header = request.headers['x-amz-content-sha256'];
  return typeof header === 'string' ? header : request.bodySha256;
}

/**
 * Signs `request` (which must carry `host`) at `date`: returns the `x-amz-date` and
 * `authorization` headers to add. Every header given is signed.
 */
export function signSigV4(
  request: Omit<SigV4Request, 'headers'> & { readonly headers: Readonly<Record<string, string>> },
  credentials: SigV4Credentials,
  scope: { readonly region: string; readonly service: string },
  date = new Date(),
): { 'x-amz-date': string; authorization: string } {
  const when = amzDate(date);
  const headers = lowercaseKeys({ ...request.headers, 'x-amz-date': when });
  const signed = Object.keys(headers).sort();
  const credentialScope = `${when.slice(0, 8)}/${scope.region}/${scope.service}/aws4_request`;
  const canonical = canonicalRequest(
    { ...request, headers },
    signed,
    payloadHashOf({ ...request, headers }),
  );
  const key = signingKey(
    credentials.secretAccessKey,
    when.slice(0, 8),
    scope.region,
    scope.service,
  );
  const signature = createHmac('sha256', key)
    .update(stringToSign(when, credentialScope, canonical))
    .digest('hex');
  return {
    'x-amz-date': when,
    authorization: `${ALGORITHM} Credential=${credentials.accessKeyId}/${credentialScope}, SignedHeaders=${signed.join(';')}, Signature=${signature}`,
  };
}

const lowercaseKeys = (headers: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));

interface ParsedAuthorization {
  readonly accessKeyId: string;
  readonly scopeDate: string;
  readonly region: string;
  readonly service: string;
  readonly signedHeaders: string[];
  readonly signature: string;
}

/** `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`, or a reason it is not. */
function parseAuthorization(header: string): ParsedAuthorization | string {
  if (!header.startsWith(`${ALGORITHM} `)) return `Unsupported algorithm; expected ${ALGORITHM}.`;
  const fields = new Map<string, string>();
  for (const part of header.slice(ALGORITHM.length + 1).split(',')) {
    const at = part.indexOf('=');
    if (at > 0) fields.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  const missing = ['Credential', 'SignedHeaders', 'Signature'].filter((f) => !fields.get(f));
  if (missing.length > 0) {
    return missing.map((f) => `Authorization header requires '${f}' parameter.`).join(' ');
  }
  const credential = fields.get('Credential')!.split('/');
  if (credential.length !== 5 || credential[4] !== 'aws4_request') {
    return 'Credential must have exactly 5 slash-delimited elements, ending in aws4_request.';
  }
  const [accessKeyId, scopeDate, region, service] = credential as [string, string, string, string];
  return {
    accessKeyId,
    scopeDate,
    region,
    service,
    signedHeaders: fields.get('SignedHeaders')!.split(';'),
    signature: fields.get('Signature')!,
  };
}

/** `20150830T123600Z` as a Date, or undefined. */
function parseAmzDate(value: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const date = new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

const refuse = (reason: SigV4Failure, message: string): SigV4Verdict => ({
  ok: false,
  reason,
  message,
});

/**
 * Verifies the SigV4 `Authorization` header of `request` the way AWS does: the header's shape,
 * the access key, the date's freshness, the credential scope and, last, the signature over the
 * canonical request (whose payload hash is `x-amz-content-sha256` when sent, which must then be
 * the body's, else the body's).
 */
export function verifySigV4(request: SigV4Request, options: SigV4VerifyOptions): SigV4Verdict {
  const header = request.headers.authorization;
  if (typeof header !== 'string' || header === '') {
    return refuse('missing', 'Missing Authentication Token');
  }
  const auth = parseAuthorization(header);
  if (typeof auth === 'string') return refuse('malformed', auth);
  const rawDate = request.headers['x-amz-date'];
  if (typeof rawDate !== 'string') {
    return refuse(
      'malformed',
      "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
    );
  }
  const date = parseAmzDate(rawDate);
  if (date === undefined) return refuse('malformed', `Invalid X-Amz-Date: ${rawDate}`);
  if (!auth.signedHeaders.includes('host') || !auth.signedHeaders.includes('x-amz-date')) {
    return refuse('malformed', "'Host' and 'X-Amz-Date' must be signed headers.");
  }
  const secretAccessKey = options.secretKeyFor(auth.accessKeyId);
  if (secretAccessKey === undefined) {
    return refuse('unknown-key', 'The security token included in the request is invalid.');
  }
  const now = options.now ?? new Date();
  if (date.getTime() < now.getTime() - MAX_CLOCK_SKEW_MS) {
    const limit = new Date(now.getTime() - MAX_CLOCK_SKEW_MS);
    return refuse(
      'expired',
      `Signature expired: ${rawDate} is now earlier than ${amzDate(limit)} (${amzDate(now)} - 15 min.)`,
    );
  }
  if (date.getTime() > now.getTime() + MAX_CLOCK_SKEW_MS) {
    const limit = new Date(now.getTime() + MAX_CLOCK_SKEW_MS);
    return refuse(
      'expired',
      `Signature not yet current: ${rawDate} is still later than ${amzDate(limit)} (${amzDate(now)} + 15 min.)`,
    );
  }
  if (auth.scopeDate !== rawDate.slice(0, 8)) {
    return refuse(
      'scope',
      `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${auth.scopeDate}' != '${rawDate.slice(0, 8)}'`,
    );
  }
  if (auth.region !== options.region) {
    return refuse('scope', 'Credential should be scoped to a valid region.');
  }
  if (auth.service !== options.service) {
    return refuse('scope', `Credential should be scoped to correct service: '${options.service}'.`);
  }
  const payloadHash = payloadHashOf(request);
  if (!LITERAL_PAYLOAD_HASHES.test(payloadHash) && payloadHash !== request.bodySha256) {
    return refuse(
      'mismatch',
      "The provided 'x-amz-content-sha256' header does not match what was computed.",
    );
  }
  const canonical = canonicalRequest(
    request,
    auth.signedHeaders,
    payloadHash,
    options.uriEscapePath ?? true,
  );
  const key = signingKey(secretAccessKey, auth.scopeDate, auth.region, auth.service);
  const scope = `${auth.scopeDate}/${auth.region}/${auth.service}/aws4_request`;
  const expected = createHmac('sha256', key)
    .update(stringToSign(rawDate, scope, canonical))
    .digest();
  const given = Buffer.from(auth.signature, 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return refuse(
      'mismatch',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
  }
  return { ok: true, accessKeyId: auth.accessKeyId };
}
