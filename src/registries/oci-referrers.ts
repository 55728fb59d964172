import { setTimeout as sleep } from 'node:timers/promises';
import { ociPathProblem, splitImageReference } from './naming.js';
import {
  checkDigest,
  checkDigestHeader,
  contentType,
  descriptorsIn,
  listed,
  MANIFEST_TYPES,
  manifestMediaType,
  nextLink,
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  type OciDescriptor,
  type OciManifestContent,
  parseManifest,
  referrersTag,
  sha256Digest,
  sortedAnnotations,
  verifiedDigest,
} from './oci-documents.js';
import { type Access, type OciAnswer, type OciClientOptions, OciSession } from './oci-session.js';
import type { RepositoryAddress } from './registry.js';
import { isRecord } from './registry-answers.js';

export { OciRegistryError, type OciClientOptions } from './oci-session.js';
export {
  DOCKER_MANIFEST,
  DOCKER_MANIFEST_LIST,
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  type OciDescriptor,
  type OciManifestContent,
  referrersTag,
  sha256Digest,
  SIGSTORE_BUNDLE_V03,
  sigstoreBundleAnnotations,
} from './oci-documents.js';

/*
 * Attaching signed attestations to an image as OCI 1.1 referrers, and reading them back.
 *
 * What `cosign attest --new-bundle-format` writes, and therefore what kiln writes (cosign
 * pkg/oci/remote/write.go WriteAttestationNewBundleFormat and WriteReferrer, read at cosign
 * commit d6d86c2; the media type string from sigstore-go pkg/bundle/bundle.go MediaTypeString):
 *
 * 1. The blob `{}` (2 bytes, sha256:44136fa3…aaff8a), the config (writeEmptyConfigLayer).
 * 2. The bundle JSON as a blob.
 * 3. A manifest, pushed by its digest, with the fields in this order:
 *      {
 *        "schemaVersion": 2,
 *        "mediaType": "application/vnd.oci.image.manifest.v1+json",
 *        "config": { "mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
 *                    "digest": "sha256:44136fa3…", "artifactType": <artifactType> },
 *        "layers": [ { "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
 *                      "size": <n>, "digest": <sha256 of the bundle> } ],
 *        "annotations": {                                 (keys sorted, as Go writes a map)
 *          "dev.sigstore.bundle.content": "dsse-envelope",
 *          "dev.sigstore.bundle.predicateType": <the statement's predicateType>,
 *          "org.opencontainers.image.created": <RFC 3339 UTC, whole seconds> },
 *        "subject": { "mediaType": <the image's>, "size": <n>, "digest": <the image digest> },
 *        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json"
 *      }
 *    The config descriptor's `artifactType` is cosign's (go-containerregistry's Descriptor has
 *    the field); kiln writes it too so that both produce the same shape.
 * 4. go-containerregistry's remote.Put (pkg/v1/remote/write.go commitManifest and
 *    commitSubjectReferrers, at commit 3f4ff3c) then asks `GET /v2/<name>/referrers/<subject>`;
 *    on anything but 200 it maintains the referrers tag `sha256-<hex>`: an image index
 *    (`application/vnd.oci.image.index.v1+json`, schemaVersion 2) whose `manifests` gain
 *    `{mediaType, size, digest, artifactType}` of the new manifest unless already listed.
 *
 * What `cosign verify-attestation --new-bundle-format` reads (cosign pkg/cosign/verify.go
 * GetBundles, pkg/oci/remote/referrers.go, pkg/oci/remote/signatures.go Bundle; and
 * go-containerregistry pkg/v1/remote/referrers.go fetchReferrers): it resolves the image digest,
 * lists referrers without an artifactType filter (the referrers API when it answers 200 with
 * Content-Type `application/vnd.oci.image.index.v1+json`, else the `sha256-<hex>` tag; a missing
 * tag is an empty list), and for each listed manifest takes it as a bundle when it has exactly
 * one layer whose mediaType starts with `application/vnd.dev.sigstore.bundle`, the layer being a
 * bundle of v0.3 or later. Other referrers are skipped.
 *
 * kiln follows the OCI distribution spec (spec.md "Pushing Manifests with Subject", "Listing
 * Referrers", "Referrers Tag Schema") where go-containerregistry is looser: the descriptor added
 * to the tag carries the manifest's annotations too, and an entry already in the index is kept
 * as it was, never rewritten or dropped. A registry that answers the manifest push with
 * `OCI-Subject` has processed the subject itself (the spec), so the tag is left alone then.
 */

const ACCEPT_MANIFESTS = MANIFEST_TYPES.join(', ');
const EMPTY_CONFIG = Buffer.from('{}');
/** The spec's floor for what a registry must take as a manifest. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024;
const MAX_REFERRER_PAGES = 50;
const FALLBACK_ATTEMPTS = 5;
const FALLBACK_RETRY_MS = 100;

export interface ResolvedImage {
  readonly repository: RepositoryAddress;
  readonly digest: string;
  readonly mediaType: string;
  readonly size: number;
}

export interface ArtifactToAttach {
  /** The manifest's `artifactType`, e.g. SIGSTORE_BUNDLE_V03. */
  readonly artifactType: string;
  readonly layerMediaType: string;
  readonly content: Buffer;
  /** Part of the manifest, hence of its digest: the same values attach the same manifest. */
  readonly annotations: Readonly<Record<string, string>>;
}

export interface AttachResult {
  /** The referrer manifest's digest. */
  readonly digest: string;
  readonly via: 'referrers-api' | 'fallback-tag';
}

export interface FetchedManifest {
  readonly digest: string;
  readonly mediaType: string;
  /** The bytes as served; their sha256 is `digest`. */
  readonly raw: Buffer;
  readonly content: OciManifestContent;
}

/**
 * An OCI distribution client for one registry host (the first it is used with): resolves image
 * references, attaches artifacts to an image as referrers and reads them back. Everything read is
 * checked against its digest.
 */
export class OciReferrers {
  private session: OciSession | undefined;
  /** Fallback-tag updates in flight, per repository and subject: one at a time in this process. */
  private readonly fallbackUpdates = new Map<string, Promise<unknown>>();

  constructor(private readonly options: OciClientOptions = {}) {}

  /**
   * The digest, media type and size of the manifest `imageRef` (`host/path:tag` or
   * `host/path@sha256:…`) names. A GET rather than a HEAD: the digest is computed from the bytes,
   * not taken from a header.
   */
  async resolve(imageRef: string): Promise<ResolvedImage> {
    const reference = splitImageReference(imageRef);
    const repository = { host: reference.host, path: reference.path };
    const session = this.sessionFor(repository);
    const wanted = reference.digest ?? reference.tag ?? 'latest';
    const operation = `GET manifest ${repository.path}${reference.digest === undefined ? ':' : '@'}${wanted}`;
    if (reference.digest !== undefined) checkDigest(session, operation, reference.digest);
    const answer = await this.getManifest(session, repository, wanted, operation, 'pull');
    if (answer.status !== 200) {
      throw session.refusal(this.request(repository, operation, 'pull'), answer);
    }
    const digest = verifiedDigest(session, operation, answer, reference.digest);
    const mediaType = manifestMediaType(session, operation, answer);
    return { repository, digest, mediaType, size: answer.body.length };
  }

  /**
   * Pushes `artifact` as a referrer of `subject` (an image manifest in `repository`): the empty
   * config and the content as blobs (skipping those the registry has), the manifest by digest,
   * then, when the registry has no referrers API, the referrers tag. Idempotent; a different
   * artifact adds to what is attached, never replaces it.
   */
  async attach(
    repository: RepositoryAddress,
    subject: { readonly digest: string; readonly mediaType: string; readonly size: number },
    artifact: ArtifactToAttach,
  ): Promise<AttachResult> {
    const session = this.sessionFor(repository);
    const operation = `attach to ${repository.path}@${subject.digest}`;
    checkDigest(session, operation, subject.digest);
    const layerDigest = sha256Digest(artifact.content);
    await this.pushBlob(repository, EMPTY_CONFIG);
    await this.pushBlob(repository, artifact.content);

    const annotations = sortedAnnotations(artifact.annotations);
    const raw = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: {
          mediaType: OCI_EMPTY,
          size: EMPTY_CONFIG.length,
          digest: sha256Digest(EMPTY_CONFIG),
          artifactType: artifact.artifactType,
        },
        layers: [
          {
            mediaType: artifact.layerMediaType,
            size: artifact.content.length,
            digest: layerDigest,
          },
        ],
        ...(annotations === undefined ? {} : { annotations }),
        subject: { mediaType: subject.mediaType, size: subject.size, digest: subject.digest },
        artifactType: artifact.artifactType,
      }),
    );
    const digest = sha256Digest(raw);
    const pushed = await this.putManifest(repository, digest, OCI_MANIFEST, raw, digest);
    if (pushed.headers.get('oci-subject') === subject.digest) {
      return { digest, via: 'referrers-api' };
    }
    if ((await this.referrersApi(repository, subject.digest, 'push')) !== undefined) {
      return { digest, via: 'referrers-api' };
    }
    await this.addToReferrersTag(repository, subject.digest, {
      mediaType: OCI_MANIFEST,
      size: raw.length,
      digest,
      ...(annotations === undefined ? {} : { annotations }),
      artifactType: artifact.artifactType,
    });
    return { digest, via: 'fallback-tag' };
  }

  /**
   * The referrers of `digest`, of `artifactType` when given: from the referrers API when the
   * registry has one, else from the referrers tag; empty when there are none.
   */
  async referrers(
    repository: RepositoryAddress,
    digest: string,
    artifactType?: string,
  ): Promise<OciDescriptor[]> {
    const session = this.sessionFor(repository);
    checkDigest(session, `list referrers of ${repository.path}@${digest}`, digest);
    let found = await this.referrersApi(repository, digest, 'pull', artifactType);
    if (found === undefined) {
      const tag = await this.readReferrersTag(repository, referrersTag(digest), 'pull');
      // The spec: a tag that is not a valid image index means no referrers.
      found = tag.kind === 'index' ? descriptorsIn(tag.entries) : [];
    }
    // Filtered here as well: a registry may ignore the filter (no OCI-Filters-Applied).
    return artifactType === undefined
      ? found
      : found.filter((d) => d.artifactType === artifactType);
  }

  /** The manifest `digest` names, its bytes checked against the digest. */
  async manifest(repository: RepositoryAddress, digest: string): Promise<FetchedManifest> {
    const session = this.sessionFor(repository);
    const operation = `GET manifest ${repository.path}@${digest}`;
    checkDigest(session, operation, digest);
    const answer = await this.getManifest(session, repository, digest, operation, 'pull');
    if (answer.status !== 200) {
      throw session.refusal(this.request(repository, operation, 'pull'), answer);
    }
    verifiedDigest(session, operation, answer, digest);
    const mediaType = manifestMediaType(session, operation, answer);
    return {
      digest,
      mediaType,
      raw: answer.body,
      content: parseManifest(session, operation, answer.body),
    };
  }

  /** The blob `digest` names, at most `maxBytes` (64 MiB unless given), checked against the digest. */
  async blob(
    repository: RepositoryAddress,
    digest: string,
    maxBytes = DEFAULT_MAX_BLOB_BYTES,
  ): Promise<Buffer> {
    const session = this.sessionFor(repository);
    const operation = `GET blob ${repository.path}@${digest}`;
    checkDigest(session, operation, digest);
    const request = this.request(repository, operation, 'pull');
    const answer = await session.send({
      ...request,
      method: 'GET',
      target: `/v2/${repository.path}/blobs/${digest}`,
      maxBytes,
    });
    if (answer.status !== 200) throw session.refusal(request, answer);
    verifiedDigest(session, operation, answer, digest);
    return answer.body;
  }

  private sessionFor(repository: RepositoryAddress): OciSession {
    this.session ??= new OciSession(repository.host, this.options);
    const operation = `use ${repository.host}/${repository.path}`;
    if (repository.host !== this.session.host) {
      // The credentials belong to one registry; another host gets a client of its own.
      throw this.session.error(
        operation,
        undefined,
        `this client serves ${this.session.host} only`,
      );
    }
    const problem = ociPathProblem(repository.path);
    if (problem !== undefined) throw this.session.error(operation, undefined, problem);
    return this.session;
  }

  private request(repository: RepositoryAddress, operation: string, access: Access) {
    return { repository: repository.path, operation, access };
  }

  private async getManifest(
    session: OciSession,
    repository: RepositoryAddress,
    reference: string,
    operation: string,
    access: Access,
  ): Promise<OciAnswer> {
    return session.send({
      ...this.request(repository, operation, access),
      method: 'GET',
      target: `/v2/${repository.path}/manifests/${reference}`,
      headers: { accept: ACCEPT_MANIFESTS },
      maxBytes: MAX_MANIFEST_BYTES,
    });
  }

  /** HEAD, and when absent a monolithic upload: POST for a location, PUT with the digest. */
  private async pushBlob(repository: RepositoryAddress, content: Buffer): Promise<void> {
    const session = this.sessionFor(repository);
    const digest = sha256Digest(content);
    const base = this.request(repository, `HEAD blob ${repository.path}@${digest}`, 'push');
    const head = await session.send({
      ...base,
      method: 'HEAD',
      target: `/v2/${repository.path}/blobs/${digest}`,
      maxBytes: 0,
    });
    if (head.status === 200) return;
    if (head.status !== 404) throw session.refusal(base, head);

    const start = { ...base, operation: `POST blob upload ${repository.path}` };
    const started = await session.send({
      ...start,
      method: 'POST',
      target: `/v2/${repository.path}/blobs/uploads/`,
      maxBytes: 64 * 1024,
    });
    const location = started.headers.get('location');
    if (started.status !== 202) throw session.refusal(start, started);
    if (location === null) {
      throw session.error(start.operation, 202, 'answered 202 without a Location');
    }
    const target = new URL(location, started.url);
    target.searchParams.set('digest', digest);

    const finish = { ...base, operation: `PUT blob ${repository.path}@${digest}` };
    const finished = await session.send({
      ...finish,
      method: 'PUT',
      target: target.href,
      headers: { 'content-type': 'application/octet-stream' },
      body: content,
      maxBytes: 64 * 1024,
    });
    if (finished.status !== 201) throw session.refusal(finish, finished);
    checkDigestHeader(session, finish.operation, finished, digest);
  }

  private async putManifest(
    repository: RepositoryAddress,
    reference: string,
    mediaType: string,
    raw: Buffer,
    digest: string,
    ifMatch?: string,
  ): Promise<OciAnswer> {
    const session = this.sessionFor(repository);
    const separator = reference.startsWith('sha256:') ? '@' : ':';
    const request = this.request(
      repository,
      `PUT manifest ${repository.path}${separator}${reference}`,
      'push',
    );
    const answer = await session.send({
      ...request,
      method: 'PUT',
      target: `/v2/${repository.path}/manifests/${reference}`,
      headers: {
        'content-type': mediaType,
        ...(ifMatch === undefined ? {} : { 'if-match': ifMatch }),
      },
      body: raw,
      maxBytes: 64 * 1024,
    });
    // Only a conditional put may find the tag changed; the caller then starts over.
    if (answer.status === 412 && ifMatch !== undefined) return answer;
    if (![200, 201, 202].includes(answer.status)) throw session.refusal(request, answer);
    checkDigestHeader(session, request.operation, answer, digest);
    return answer;
  }

  /**
   * The referrers API's list (all pages), or undefined when the registry has no such API: it
   * answered 404, 400, 405 or 406, or 200 with something other than an image index.
   */
  private async referrersApi(
    repository: RepositoryAddress,
    digest: string,
    access: Access,
    artifactType?: string,
  ): Promise<OciDescriptor[] | undefined> {
    const session = this.sessionFor(repository);
    const request = this.request(repository, `GET referrers ${repository.path}@${digest}`, access);
    let target = `/v2/${repository.path}/referrers/${digest}`;
    if (artifactType !== undefined) target += `?artifactType=${encodeURIComponent(artifactType)}`;
    const found: OciDescriptor[] = [];
    for (let page = 0; page < MAX_REFERRER_PAGES; page += 1) {
      const answer = await session.send({
        ...request,
        method: 'GET',
        target,
        headers: { accept: OCI_INDEX },
        maxBytes: MAX_MANIFEST_BYTES,
      });
      if (page === 0 && [400, 404, 405, 406].includes(answer.status)) return undefined;
      if (answer.status !== 200) throw session.refusal(request, answer);
      if (contentType(answer) !== OCI_INDEX) {
        if (page === 0) return undefined;
        throw session.error(
          request.operation,
          200,
          `a later page is ${contentType(answer)}, not an image index`,
        );
      }
      const index = parseManifest(session, request.operation, answer.body);
      found.push(...(index.manifests ?? []));
      const next = nextLink(answer.headers.get('link'));
      if (next === undefined) return found;
      const url = new URL(next, answer.url);
      if (url.origin !== new URL(answer.url).origin) {
        throw session.error(request.operation, 200, 'the next page is on another host');
      }
      target = url.href;
    }
    throw session.error(
      request.operation,
      200,
      `more than ${MAX_REFERRER_PAGES} pages of referrers`,
    );
  }

  /**
   * Adds `descriptor` to the referrers tag of `subject`. Reading the index, adding and putting it
   * back is a read-modify-write that registries do not make atomic, and two writers can each put
   * an index without the other's entry. Within this process updates of one tag run one at a time.
   * Across processes kiln does what the registry allows: the put carries `If-Match` with the
   * ETag read (a registry that honours it answers 412 when the tag changed, and kiln starts
   * over), and the tag is read again after the put; when the entry is missing, another writer
   * overwrote it and kiln adds it again. A writer that overwrites after that second read can still
   * drop the entry on a registry that ignores If-Match; only the referrers API closes that gap.
   */
  private async addToReferrersTag(
    repository: RepositoryAddress,
    subject: string,
    descriptor: OciDescriptor,
  ): Promise<void> {
    const key = `${repository.path}@${subject}`;
    const before = this.fallbackUpdates.get(key) ?? Promise.resolve();
    const update = before
      .catch(() => undefined)
      .then(() => this.updateReferrersTag(repository, subject, descriptor));
    this.fallbackUpdates.set(key, update);
    try {
      await update;
    } finally {
      if (this.fallbackUpdates.get(key) === update) this.fallbackUpdates.delete(key);
    }
  }

  private async updateReferrersTag(
    repository: RepositoryAddress,
    subject: string,
    descriptor: OciDescriptor,
  ): Promise<void> {
    const session = this.sessionFor(repository);
    const tag = referrersTag(subject);
    const operation = `update referrers tag ${repository.path}:${tag}`;
    for (let attempt = 1; attempt <= FALLBACK_ATTEMPTS; attempt += 1) {
      if (attempt > 1) await sleep(FALLBACK_RETRY_MS * attempt * (0.5 + Math.random()));
      const current = await this.readReferrersTag(repository, tag, 'push');
      if (current.kind === 'other') {
        throw session.error(
          operation,
          200,
          `the tag holds ${current.mediaType}, not the image index of the referrers tag schema; kiln does not overwrite it`,
        );
      }
      const base =
        current.kind === 'index' ? current.index : { schemaVersion: 2, mediaType: OCI_INDEX };
      const entries = current.kind === 'index' ? current.entries : [];
      if (listed(entries, descriptor.digest)) return;
      const raw = Buffer.from(JSON.stringify({ ...base, manifests: [...entries, descriptor] }));
      const put = await this.putManifest(
        repository,
        tag,
        OCI_INDEX,
        raw,
        sha256Digest(raw),
        current.etag,
      );
      if (put.status === 412) continue;
      const after = await this.readReferrersTag(repository, tag, 'push');
      if (after.kind === 'index' && listed(after.entries, descriptor.digest)) return;
    }
    throw session.error(
      operation,
      undefined,
      `the tag kept changing under other writers; ${descriptor.digest} is not listed after ${FALLBACK_ATTEMPTS} attempts`,
    );
  }

  /** The referrers tag as it stands: absent, an image index (entries as sent), or something else. */
  private async readReferrersTag(
    repository: RepositoryAddress,
    tag: string,
    access: Access,
  ): Promise<
    | { kind: 'absent'; etag?: undefined }
    | { kind: 'index'; index: Record<string, unknown>; entries: unknown[]; etag?: string }
    | { kind: 'other'; mediaType: string }
  > {
    const session = this.sessionFor(repository);
    const operation = `GET manifest ${repository.path}:${tag}`;
    // Every manifest type is accepted: with the index type alone, a registry hides a tag that
    // holds something else behind a 404, and kiln would overwrite it.
    const answer = await this.getManifest(session, repository, tag, operation, access);
    if (answer.status === 404) return { kind: 'absent' };
    if (answer.status !== 200) {
      throw session.refusal(this.request(repository, operation, access), answer);
    }
    verifiedDigest(session, operation, answer, undefined);
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.body.toString('utf8'));
    } catch {
      return { kind: 'other', mediaType: 'something that is not JSON' };
    }
    const own = isRecord(parsed) ? parsed.mediaType : undefined;
    const mediaType = typeof own === 'string' ? own : contentType(answer);
    if (
      !isRecord(parsed) ||
      parsed.schemaVersion !== 2 ||
      mediaType !== OCI_INDEX ||
      !Array.isArray(parsed.manifests)
    ) {
      return { kind: 'other', mediaType: mediaType ?? 'a document without a type' };
    }
    // If-Match compares strongly (RFC 9110): a weak ETag would never match, so none is sent.
    const header = answer.headers.get('etag');
    const etag = header === null || header.startsWith('W/') ? undefined : header;
    return {
      kind: 'index',
      index: parsed,
      entries: parsed.manifests as unknown[],
      ...(etag === undefined ? {} : { etag }),
    };
  }
}
