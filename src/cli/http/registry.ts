import { createHash } from 'node:crypto';
import { UsageError } from './exit-codes.js';

/*
 * The registry reader of `kiln verify`: just enough of the OCI distribution API to find the
 * attestations kiln attached to an image (docs/provenance.md, "Attached to the image"). It
 * resolves a tag or digest to the manifest's digest, lists the image's referrers (the referrers
 * API, else the referrers tag schema's fallback tag `sha256-<hex>`), and fetches a referrer's
 * manifest and layer. Every manifest and blob is checked against its digest; a digest is never
 * taken from a header alone.
 *
 * Auth is the Docker Registry v2 token flow: a request goes out anonymously (or as an earlier 401
 * taught), a 401's `WWW-Authenticate` challenge is answered with a Bearer token for
 * `repository:<path>:pull` from the challenge's realm, or with Basic credentials. Credentials come
 * from docker's config file (docker-config.ts). No message carries a credential, a token, or
 * anything the registry wrote back beyond its error code.
 */

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const ACCEPT_MANIFESTS = [
  OCI_MANIFEST,
  OCI_INDEX,
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_TOKEN_BYTES = 64 * 1024;
const TIMEOUT_MS = 30_000;
const MAX_REDIRECTS = 5;
const MAX_REFERRER_PAGES = 20;
/** What a registry without the referrers API answers GET /referrers with (distribution spec). */
const NO_REFERRERS_API = [400, 404, 405, 406];

const DOMAIN =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$/;
const PATH = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG = /^\w[\w.-]{0,127}$/;
const SHA256 = /^sha256:[0-9a-f]{64}$/;

/** An image reference split as docker reads it. */
export interface ImageReference {
  /** As docker names it: `docker.io` for Docker Hub. */
  readonly host: string;
  readonly repository: string;
  readonly tag?: string;
  readonly digest?: string;
}

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** An OCI content descriptor, as far as `kiln verify` reads one. */
export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly artifactType?: string;
}

/** The registry could not be reached, refused, or has no such image. The message says which. */
export class RegistryError extends Error {
  override readonly name = 'RegistryError';
}

/**
 * `text` split as docker does: the first part is the registry host when it has a '.' or ':', is
 * `localhost` or has an uppercase letter; otherwise the image is on Docker Hub (`library/` for a
 * one-part name). Without a tag or digest it is `latest`. Throws UsageError for anything else.
 */
export function parseImageReference(text: string): ImageReference {
  const slash = text.indexOf('/');
  const first = slash < 0 ? '' : text.slice(0, slash);
  const named =
    first !== '' && (/[.:]/.test(first) || first === 'localhost' || /[A-Z]/.test(first));
  const rest = named ? text.slice(slash + 1) : text;
  const at = rest.indexOf('@');
  const digest = at < 0 ? undefined : rest.slice(at + 1);
  const name = at < 0 ? rest : rest.slice(0, at);
  const colon = name.lastIndexOf(':');
  const tag = colon > name.lastIndexOf('/') ? name.slice(colon + 1) : undefined;
  let repository = tag === undefined ? name : name.slice(0, colon);
  const reference = tag ?? (digest === undefined ? 'latest' : undefined);
  const host = !named || first.toLowerCase() === 'index.docker.io' ? 'docker.io' : first;
  if (host === 'docker.io' && !repository.includes('/')) repository = `library/${repository}`;
  const problem = !DOMAIN.test(host)
    ? `"${host}" is not a registry host`
    : !PATH.test(repository) || repository.length > 255
      ? `"${repository}" is not a repository name (lowercase letters, digits, separators)`
      : reference !== undefined && !TAG.test(reference)
        ? `"${reference}" is not a tag`
        : digest !== undefined && !SHA256.test(digest)
          ? `"${digest}" is not a sha256 digest`
          : undefined;
  if (problem !== undefined) throw new UsageError(`${text} is not an image reference: ${problem}`);
  return {
    host,
    repository,
    ...(reference === undefined ? {} : { tag: reference }),
    ...(digest === undefined ? {} : { digest }),
  };
}

export interface RegistryReaderOptions {
  /** Plain HTTP: only when asked (--insecure), never guessed from the host. */
  readonly insecure: boolean;
  readonly credentials: Credentials | undefined;
  /** Where credentials are looked for, to name in a refusal. */
  readonly credentialsFrom: string;
  readonly timeoutMs?: number;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  readonly url: string;
}

/** Reads one repository of one registry, authorized as the registry asks. */
export class RegistryReader {
  private readonly origin: string;
  private readonly name: string;
  private authorization: string | undefined;

  constructor(
    private readonly image: Pick<ImageReference, 'host' | 'repository'>,
    private readonly options: RegistryReaderOptions,
  ) {
    // Docker Hub's name is not where its API answers.
    const apiHost = image.host === 'docker.io' ? 'registry-1.docker.io' : image.host;
    this.origin = `${options.insecure ? 'http' : 'https'}://${apiHost}`;
    this.name = `${image.host}/${image.repository}`;
  }

  /** The digest of the manifest `reference` (a tag or a digest) names, from its bytes. */
  async resolve(reference: string): Promise<string> {
    const isDigest = reference.startsWith('sha256:');
    const what = `${this.name}${isDigest ? '@' : ':'}${reference}`;
    const answer = await this.get(`manifests/${reference}`, what, ACCEPT_MANIFESTS);
    if (answer.status === 404) {
      throw new RegistryError(`${what}: no such image in the registry${codeOf(answer)}`);
    }
    this.expectOk(answer, what);
    return this.digestOf(answer, what, isDigest ? reference : undefined);
  }

  /**
   * The referrers of the manifest `digest`: the referrers API's list when the registry has the
   * API, else the image index under the fallback tag (none when that tag is absent or holds no
   * index, as the referrers tag schema says).
   */
  async referrers(
    digest: string,
  ): Promise<{ via: 'referrers-api' | 'fallback-tag'; descriptors: Descriptor[] }> {
    const what = `the referrers of ${this.name}@${digest}`;
    let target = `referrers/${digest}`;
    const found: Descriptor[] = [];
    for (let page = 0; page < MAX_REFERRER_PAGES; page += 1) {
      const answer = await this.get(target, what, OCI_INDEX);
      const isIndex = contentType(answer) === OCI_INDEX;
      const noApi = NO_REFERRERS_API.includes(answer.status) || (answer.status === 200 && !isIndex);
      if (page === 0 && noApi) {
        return { via: 'fallback-tag', descriptors: await this.fallbackTag(digest) };
      }
      this.expectOk(answer, what);
      if (!isIndex) throw new RegistryError(`${what}: a later page is not an image index`);
      found.push(...descriptorsIn(fieldOf(parseJson(answer.body, what), 'manifests')));
      const next = nextLink(answer.headers.get('link'));
      if (next === undefined) return { via: 'referrers-api', descriptors: found };
      const url = new URL(next, answer.url);
      if (url.origin !== new URL(answer.url).origin) {
        throw new RegistryError(`${what}: the next page is on another host`);
      }
      target = url.href;
    }
    throw new RegistryError(`${what}: more than ${MAX_REFERRER_PAGES} pages`);
  }

  /** The image manifest `digest` names, checked against it: its layers and its subject. */
  async manifest(
    digest: string,
  ): Promise<{ layers: Descriptor[]; subject: Descriptor | undefined }> {
    const what = `${this.name}@${digest}`;
    const answer = await this.get(`manifests/${digest}`, what, ACCEPT_MANIFESTS);
    this.expectOk(answer, what);
    this.digestOf(answer, what, digest);
    const manifest = parseJson(answer.body, what);
    const [subject] = descriptorsIn([fieldOf(manifest, 'subject')]);
    return { layers: descriptorsIn(fieldOf(manifest, 'layers')), subject };
  }

  /** The blob `digest` names, at most `maxBytes`, checked against the digest. */
  async blob(digest: string, maxBytes: number): Promise<Buffer> {
    const what = `blob ${this.name}@${digest}`;
    const answer = await this.get(`blobs/${digest}`, what, undefined, maxBytes);
    this.expectOk(answer, what);
    this.digestOf(answer, what, digest);
    return answer.body;
  }

  private async fallbackTag(digest: string): Promise<Descriptor[]> {
    const tag = `sha256-${digest.slice('sha256:'.length)}`;
    const what = `${this.name}:${tag}`;
    const answer = await this.get(`manifests/${tag}`, what, ACCEPT_MANIFESTS);
    if (answer.status === 404) return [];
    this.expectOk(answer, what);
    const index = parseJson(answer.body, what);
    if (fieldOf(index, 'mediaType') !== OCI_INDEX) return [];
    return descriptorsIn(fieldOf(index, 'manifests'));
  }

  /** A GET of `target` (under /v2/<repository>/, or a URL the registry gave), authorized. */
  private async get(
    target: string,
    what: string,
    accept: string | undefined,
    maxBytes = MAX_MANIFEST_BYTES,
  ): Promise<Answer> {
    const url = new URL(
      /^https?:/.test(target) ? target : `/v2/${this.image.repository}/${target}`,
      this.origin,
    );
    const answer = await this.send(url, what, accept, maxBytes, this.authorization);
    if (answer.status !== 401) return answer;
    this.authorization = await this.authorize(answer, what);
    return this.send(url, what, accept, maxBytes, this.authorization);
  }

  /**
   * One GET, redirects followed by hand: the Authorization header goes to the origin asked
   * only, never to the storage a blob redirect names.
   */
  private async send(
    url: URL,
    what: string,
    accept: string | undefined,
    maxBytes: number,
    authorization: string | undefined,
  ): Promise<Answer> {
    let target = url;
    let auth = authorization;
    try {
      for (let hop = 0; ; hop += 1) {
        const response = await fetch(target, {
          headers: {
            ...(accept === undefined ? {} : { accept }),
            ...(auth === undefined ? {} : { authorization: auth }),
          },
          redirect: 'manual',
          signal: AbortSignal.timeout(this.options.timeoutMs ?? TIMEOUT_MS),
        });
        const location = response.headers.get('location');
        if ([301, 302, 303, 307, 308].includes(response.status) && location !== null) {
          await response.body?.cancel();
          if (hop === MAX_REDIRECTS) throw new RegistryError(`${what}: too many redirects`);
          target = new URL(location, target);
          if (target.origin !== url.origin) auth = undefined;
          continue;
        }
        const body = await readCapped(response, maxBytes);
        if (body === undefined) {
          throw new RegistryError(`${what}: the answer is larger than ${maxBytes} bytes`);
        }
        return { status: response.status, headers: response.headers, body, url: target.href };
      }
    } catch (error) {
      if (error instanceof RegistryError) throw error;
      throw new RegistryError(`${what}: ${this.unreachable(error)}`);
    }
  }

  /** The Authorization header that answers the challenge of a 401. */
  private async authorize(refusal: Answer, what: string): Promise<string> {
    const header = refusal.headers.get('www-authenticate') ?? '';
    const scheme = /^\s*([A-Za-z]+)/.exec(header)?.[1]?.toLowerCase();
    const params = challengeParams(header);
    const { credentials } = this.options;
    if (scheme === 'bearer' && params['realm'] !== undefined) {
      return `Bearer ${await this.token(params['realm'], params['service'], what)}`;
    }
    if (scheme === 'basic') {
      if (credentials === undefined) {
        throw new RegistryError(`${what}: the registry requires credentials; ${this.noneFound()}`);
      }
      return basic(credentials);
    }
    throw new RegistryError(`${what}: answered 401 without a Bearer or Basic challenge`);
  }

  /** A pull token from the token service, asked with the credentials when there are any. */
  private async token(realm: string, service: string | undefined, what: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new RegistryError(`${what}: the registry named a token service that is not a URL`);
    }
    const { credentials, insecure } = this.options;
    const named = `the token service ${url.origin}${url.pathname}`;
    if (credentials !== undefined && url.protocol !== 'https:' && !insecure) {
      throw new RegistryError(
        `${what}: ${named} is not HTTPS; kiln sends credentials to it only over HTTPS (or with --insecure)`,
      );
    }
    if (service !== undefined) url.searchParams.set('service', service);
    url.searchParams.set('scope', `repository:${this.image.repository}:pull`);
    const answer = await this.send(
      url,
      `${what}: ${named}`,
      'application/json',
      MAX_TOKEN_BYTES,
      credentials === undefined ? undefined : basic(credentials),
    );
    if (answer.status !== 200) {
      const refused = answer.status === 401 || answer.status === 403;
      const why = !refused
        ? ''
        : credentials === undefined
          ? `; it requires credentials, and ${this.noneFound()}`
          : `; it refused the credentials for ${this.image.host} in ${this.options.credentialsFrom}`;
      throw new RegistryError(`${what}: ${named} answered ${answer.status}${why}`);
    }
    const parsed = parseJson(answer.body, `${what}: ${named}`);
    const token = fieldOf(parsed, 'token') ?? fieldOf(parsed, 'access_token');
    if (typeof token !== 'string' || token === '') {
      throw new RegistryError(`${what}: ${named} answered without a token`);
    }
    return token;
  }

  private expectOk(answer: Answer, what: string): void {
    if (answer.status === 200) return;
    const { credentials, credentialsFrom } = this.options;
    const why =
      answer.status === 401
        ? credentials === undefined
          ? `the registry requires credentials; ${this.noneFound()}`
          : `the registry refused the credentials for ${this.image.host} in ${credentialsFrom}`
        : answer.status === 403
          ? `the registry denies pulling ${this.image.repository}`
          : answer.status === 404
            ? 'not found'
            : 'unexpected';
    throw new RegistryError(`${what}: answered ${answer.status} (${why})${codeOf(answer)}`);
  }

  /** The sha256 of the bytes: it must be `expected` when given, and any digest header. */
  private digestOf(answer: Answer, what: string, expected: string | undefined): string {
    const digest = `sha256:${createHash('sha256').update(answer.body).digest('hex')}`;
    const header = answer.headers.get('docker-content-digest');
    for (const claimed of [expected, header ?? undefined]) {
      if (claimed !== undefined && claimed !== digest) {
        throw new RegistryError(`${what}: the registry sent content whose digest is ${digest}`);
      }
    }
    return digest;
  }

  private noneFound(): string {
    return `none for ${this.image.host} in ${this.options.credentialsFrom} (docker login writes them there)`;
  }

  private unreachable(error: unknown): string {
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    if (cause instanceof Error && cause.name === 'TimeoutError') {
      return `no answer within ${(this.options.timeoutMs ?? TIMEOUT_MS) / 1000} s`;
    }
    const code = (cause as { code?: unknown } | undefined)?.code;
    const reason = typeof code === 'string' ? code : cause instanceof Error ? cause.message : '';
    // A registry that speaks plain HTTP fails the TLS handshake: say what would reach it.
    const tls = !this.options.insecure && /SSL|EPROTO|TLS/i.test(reason);
    return `could not be reached (${reason})${tls ? '; for a registry without TLS pass --insecure' : ''}`;
  }
}

function basic(credentials: Credentials): string {
  const pair = `${credentials.username}:${credentials.password}`;
  return `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
}

/** The `key=value` and `key="value"` parameters of a challenge (only the first is answered). */
function challengeParams(header: string): Record<string, string> {
  const params: Record<string, string> = {};
  for (const match of header.matchAll(/([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g)) {
    const key = match[1]!.toLowerCase();
    params[key] ??= match[2]?.replace(/\\(.)/g, '$1') ?? match[3] ?? '';
  }
  return params;
}

/** `, <CODE>` of an OCI error body: the code only, never the message, which may echo a header. */
function codeOf(answer: Answer): string {
  try {
    const errors = fieldOf(JSON.parse(answer.body.toString('utf8')), 'errors');
    const code = Array.isArray(errors) ? fieldOf(errors[0], 'code') : undefined;
    return typeof code === 'string' && /^[A-Z_]{1,40}$/.test(code) ? `, ${code}` : '';
  } catch {
    return '';
  }
}

function contentType(answer: Answer): string | undefined {
  return answer.headers.get('content-type')?.split(';')[0]?.trim();
}

function parseJson(body: Buffer, what: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new RegistryError(`${what}: the registry sent something that is not JSON`);
  }
}

export function fieldOf(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

/** The valid sha256 descriptors of a list; anything else is skipped, not trusted. */
function descriptorsIn(list: unknown): Descriptor[] {
  if (!Array.isArray(list)) return [];
  return list.flatMap((entry) => {
    const [mediaType, digest, size, artifactType] = [
      'mediaType',
      'digest',
      'size',
      'artifactType',
    ].map((key) => fieldOf(entry, key));
    if (typeof mediaType !== 'string' || typeof digest !== 'string' || !SHA256.test(digest)) {
      return [];
    }
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) return [];
    if (artifactType !== undefined && typeof artifactType !== 'string') return [];
    return [{ mediaType, digest, size, ...(artifactType === undefined ? {} : { artifactType }) }];
  });
}

/** The `rel="next"` target of a Link header (RFC 8288). */
function nextLink(header: string | null): string | undefined {
  for (const part of header?.split(',') ?? []) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (match !== null && /;\s*rel="?next"?/i.test(match[2]!)) return match[1];
  }
  return undefined;
}

/** The body, or undefined when it is longer than `maxBytes` (then it is not read further). */
async function readCapped(response: Response, maxBytes: number): Promise<Buffer | undefined> {
  if (response.body === null) return Buffer.alloc(0);
  if (Number(response.headers.get('content-length') ?? 0) > maxBytes) {
    await response.body.cancel();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > maxBytes) return undefined;
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}
