import { Inject, Injectable } from '@nestjs/common';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { Logger } from 'pino';
import type { BuildSpec } from '../manifest/build-spec.js';
import {
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  UnauthorizedError,
} from '../common/errors.js';
import { MAX_JSON_DEPTH, nestsDeeperThan, refuseDeepJson } from '../common/json-body.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import { LogSink } from '../logs/log-sink.js';
import {
  type ArtifactKind,
  BuildArtifactsRepository,
  type StoredArtifact,
} from './artifacts.repository.js';
import { normalizeFindings, readStoredFindings, summarize } from './findings.js';
import { type Finding, type Severity } from '../manifest/severities.js';
import { evaluatePolicy } from '../manifest/scan-policy.js';
import { type ScanPolicy } from '../manifest/types.js';
import { readSbom } from './sbom-document.js';
import { bearerToken, hashUploadToken, newUploadToken } from './upload-token.js';
import type { ReceivedBody } from '../common/upload-body.js';

export type { ReceivedBody };

/** A stored SBOM or scan, decompressed (BuildArtifacts.documents). */
export interface StoredDocument {
  readonly kind: ArtifactKind;
  readonly tool: string;
  readonly format: string;
  readonly truncated: boolean;
  readonly bytes: Buffer;
}

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/**
 * How far past KILN_ARTIFACT_MAX_BYTES an SBOM is still read: it is checked whole (parsed as JSON
 * of a known format), so one upload holds at most this many caps in memory, and about 2.5 times
 * that again while parsed. Beyond it the upload is a 413 (docs/adr/0034-artifact-uploads.md).
 */
export const UPLOAD_LIMIT_FACTOR = 4;

export interface SbomView {
  readonly build_id: string;
  readonly tool: string;
  readonly format: string;
  readonly received_bytes: number;
  readonly truncated: boolean;
  readonly created_at: string;
  /** The SBOM document; null when it was truncated (see `partial` and `note`). */
  readonly document: unknown;
  readonly partial: string | null;
  readonly note: string | null;
}

export interface PolicyView {
  readonly fail_on: Severity | null;
  readonly ignore: readonly string[];
  readonly violated: boolean;
  readonly summary: string | null;
}

export interface ScanView {
  readonly build_id: string;
  readonly tool: string;
  readonly created_at: string;
  readonly summary: Record<Severity, number>;
  readonly findings: readonly Finding[];
  readonly policy: PolicyView | null;
}

/** The gate's answer for a build whose image was built and pushed. */
export type PolicyVerdict = { readonly pass: true } | { readonly pass: false; message: string };

/**
 * The SBOM and scan results of builds (docs/adr/0019-build-steps-and-artifacts.md): upload tokens,
 * what the steps upload, what the API serves, and the scan policy gate. Documents are checked (an
 * SBOM must be SPDX or CycloneDX JSON; a scan report must be the build's scanner's JSON), then
 * stored gzip-compressed. Which tool wrote them comes from the build's spec, never from the upload.
 */
@Injectable()
export class BuildArtifacts {
  constructor(
    private readonly repository: BuildArtifactsRepository,
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** The largest document kept (KILN_ARTIFACT_MAX_BYTES). */
  get maxBytes(): number {
    return this.config.artifactMaxBytes;
  }

  /**
   * The largest body `receive` reads for `kind`: a scan report over the cap is refused (half a
   * report cannot be gated), an SBOM up to UPLOAD_LIMIT_FACTOR caps is kept truncated.
   */
  uploadLimit(kind: ArtifactKind): number {
    return kind === 'sbom' ? this.maxBytes * UPLOAD_LIMIT_FACTOR : this.maxBytes;
  }

  /** The largest body `receive` reads of any kind. */
  get maxUploadBytes(): number {
    return this.uploadLimit('sbom');
  }

  /**
   * One token per kind for a build's pod, valid for `ttlSeconds` (the Job's deadline). Undefined
   * when the build does not exist.
   */
  async mintUploadTokens(
    buildId: string,
    ttlSeconds: number,
  ): Promise<Record<ArtifactKind, string> | undefined> {
    const tokens = { sbom: newUploadToken(), scan: newUploadToken() };
    const stored = await this.repository.insertTokens(
      buildId,
      (['sbom', 'scan'] as const).map((kind) => ({ kind, hash: hashUploadToken(tokens[kind]) })),
      ttlSeconds,
    );
    return stored ? tokens : undefined;
  }

  /**
   * Checks an upload's `Authorization` header: 401 without a token, or with one kiln did not
   * mint or that expired; 403 with a token minted for another build or another kind.
   */
  async authorizeUpload(
    buildId: string,
    kind: ArtifactKind,
    authorization: string | string[] | undefined,
  ): Promise<void> {
    const token = bearerToken(authorization);
    if (token === undefined) throw new UnauthorizedError('An upload token is required');
    const row = await this.repository.findToken(hashUploadToken(token));
    if (row === undefined || row.expired) {
      throw new UnauthorizedError('Invalid or expired upload token');
    }
    if (row.buildId !== buildId || row.kind !== kind) {
      throw new ForbiddenError('This upload token is for another build or another artifact');
    }
  }

  /**
   * Stores an SBOM or a scan report uploaded for a running build (checked, capped, compressed).
   * The body alone is judged first, as the JSON body parser judges every other body: its size
   * (413), then how deep it nests (400).
   */
  async receive(buildId: string, kind: ArtifactKind, body: ReceivedBody): Promise<void> {
    if (body.receivedBytes > this.uploadLimit(kind)) throw this.tooLarge(kind);
    refuseDeepJson(body.bytes);
    const build = await this.lifecycle.find(buildId);
    if (build === undefined) throw new NotFoundError('Build not found');
    if (build.status !== 'in_progress') throw notRunning(build);
    const stored =
      kind === 'sbom' ? await this.storeSbom(build, body) : await this.storeScan(build, body);
    if (!stored) {
      const now = await this.lifecycle.find(buildId);
      throw now === undefined ? new NotFoundError('Build not found') : notRunning(now);
    }
  }

  private tooLarge(kind: ArtifactKind): PayloadTooLargeError {
    return new PayloadTooLargeError(
      kind === 'sbom'
        ? `The SBOM is larger than ${this.uploadLimit(kind)} bytes (${UPLOAD_LIMIT_FACTOR} × KILN_ARTIFACT_MAX_BYTES)`
        : `The scan report is larger than ${this.uploadLimit(kind)} bytes (KILN_ARTIFACT_MAX_BYTES)`,
    );
  }

  /** An SBOM is read whole, even past the cap: only a document kiln accepts is kept truncated. */
  private async storeSbom(build: BuildEntity, body: ReceivedBody): Promise<boolean> {
    const tool = build.spec.sbomTool ?? 'unknown';
    const sbom = readSbom(body.bytes.toString('utf8'));
    if ('problem' in sbom) {
      throw new InvalidRequestError(`The SBOM is not usable: ${sbom.problem}`, {
        body: sbom.problem,
      });
    }
    const format = sbom.format;
    const truncated = body.receivedBytes > this.maxBytes;
    const kept = truncated ? body.bytes.subarray(0, this.maxBytes) : body.bytes;
    const stored = await this.repository.storeWhileRunning({
      buildId: build.id,
      kind: 'sbom',
      tool,
      format,
      content: await gzipAsync(kept),
      receivedBytes: body.receivedBytes,
      truncated,
      summary: null,
    });
    if (stored) {
      await this.say(
        build.id,
        truncated
          ? `WARN: [kiln] the ${tool} SBOM was ${body.receivedBytes} bytes; kiln keeps ${this.maxBytes} (KILN_ARTIFACT_MAX_BYTES), so it is stored truncated`
          : `[kiln] stored the ${tool} SBOM (${format}, ${body.receivedBytes} bytes)`,
      );
    }
    return stored;
  }

  private async storeScan(build: BuildEntity, body: ReceivedBody): Promise<boolean> {
    const tool = build.spec.scanTool;
    if (tool === null) throw new InvalidRequestError('This build has no scanner');
    const result = normalizeFindings(tool, body.bytes.toString('utf8'));
    if ('problem' in result) {
      throw new InvalidRequestError(`The ${tool} report is not usable: ${result.problem}`, {
        body: result.problem,
      });
    }
    const summary = summarize(result.findings);
    const stored = await this.repository.storeWhileRunning({
      buildId: build.id,
      kind: 'scan',
      tool,
      format: `${tool}-findings`,
      content: await gzipAsync(Buffer.from(JSON.stringify(result.findings), 'utf8')),
      receivedBytes: body.receivedBytes,
      truncated: false,
      summary,
    });
    if (stored) {
      const counts = Object.entries(summary)
        .filter(([, count]) => count > 0)
        .map(([severity, count]) => `${count} ${severity}`);
      await this.say(
        build.id,
        `[kiln] stored the ${tool} scan: ${result.findings.length} findings${counts.length > 0 ? ` (${counts.join(', ')})` : ''}`,
      );
    }
    return stored;
  }

  /**
   * GET /builds/{id}/sbom: 404 for another tenant's build and until an SBOM is stored. Whatever
   * the row holds, the answer is no 500: a document that cannot be served as JSON (truncated,
   * nested too deep, not JSON) comes as its stored text in `partial` with a note, and a row whose
   * bytes do not even decompress is a 409.
   */
  async sbom(tenantId: string, buildId: string): Promise<SbomView> {
    await this.lifecycle.get(tenantId, buildId);
    const artifact = await this.repository.find(buildId, 'sbom');
    if (artifact === undefined) throw new NotFoundError('No SBOM is stored for this build');
    const bytes = await this.unpack(artifact);
    if (bytes === undefined) throw damaged('SBOM');
    const text = bytes.toString('utf8');
    const served = artifact.truncated
      ? {
          note: `The SBOM was ${artifact.receivedBytes} bytes; kiln keeps the first ${bytes.length} (KILN_ARTIFACT_MAX_BYTES), in partial. It is not valid JSON.`,
        }
      : servedDocument(bytes, text);
    if (!artifact.truncated && 'note' in served) this.unreadable(artifact, served.note);
    return {
      build_id: buildId,
      tool: artifact.tool,
      format: artifact.format,
      received_bytes: artifact.receivedBytes,
      truncated: artifact.truncated,
      created_at: artifact.createdAt.toISOString(),
      document: 'document' in served ? served.document : null,
      partial: 'note' in served ? text : null,
      note: 'note' in served ? served.note : null,
    };
  }

  /**
   * The SBOM and scan kiln stored for a build, as bytes, for its provenance: the SBOM as it was
   * uploaded (its first KILN_ARTIFACT_MAX_BYTES when `truncated`), the scan as the normalised
   * findings GET /builds/{id}/scan serves. A row whose bytes do not decompress is left out (and
   * logged as unreadable).
   */
  async documents(buildId: string): Promise<StoredDocument[]> {
    const documents: StoredDocument[] = [];
    for (const kind of ['sbom', 'scan'] as const) {
      const artifact = await this.repository.find(buildId, kind);
      if (artifact === undefined) continue;
      const bytes = await this.unpack(artifact);
      if (bytes === undefined) continue;
      documents.push({
        kind,
        tool: artifact.tool,
        format: artifact.format,
        truncated: artifact.truncated,
        bytes,
      });
    }
    return documents;
  }

  /** GET /builds/{id}/scan: the normalised findings and the policy's verdict on them. */
  async scan(tenantId: string, buildId: string): Promise<ScanView> {
    const build = await this.lifecycle.get(tenantId, buildId);
    const artifact = await this.repository.find(buildId, 'scan');
    if (artifact === undefined) throw new NotFoundError('No scan is stored for this build');
    const findings = await this.findingsOf(artifact);
    if (findings === undefined) throw damaged('scan');
    const policy = scanPolicyOf(build.spec);
    const verdict = evaluatePolicy(policy, findings);
    return {
      build_id: buildId,
      tool: artifact.tool,
      created_at: artifact.createdAt.toISOString(),
      summary: summarize(findings),
      findings,
      policy:
        policy === undefined
          ? null
          : {
              fail_on: policy.fail_on ?? null,
              ignore: policy.ignore ?? [],
              violated: verdict.violated,
              summary: verdict.violated ? verdict.summary : null,
            },
    };
  }

  /**
   * The scan policy gate, asked by a runner when a build's image was built and pushed and every
   * step ended. Without a policy (or without `fail_on`) it always passes; with one, a missing
   * scan fails it (the policy cannot be shown to hold), and so do findings that exceed it.
   */
  async gate(build: BuildEntity): Promise<PolicyVerdict> {
    const policy = scanPolicyOf(build.spec);
    if (policy?.fail_on === undefined) return { pass: true };
    const pushed = 'The image was pushed and stays in the registry.';
    const artifact = await this.repository.find(build.id, 'scan');
    if (artifact === undefined) {
      return {
        pass: false,
        message: `scan policy fail_on=${policy.fail_on}: no scan report was stored, so the policy cannot be shown to hold (see the build log). ${pushed}`,
      };
    }
    const findings = await this.findingsOf(artifact);
    if (findings === undefined) {
      return {
        pass: false,
        message: `scan policy fail_on=${policy.fail_on}: the stored scan report cannot be read (it is damaged), so the policy cannot be shown to hold. ${pushed}`,
      };
    }
    const verdict = evaluatePolicy(policy, findings);
    return verdict.violated
      ? { pass: false, message: `${verdict.summary}. ${pushed}` }
      : { pass: true };
  }

  private async say(buildId: string, text: string): Promise<void> {
    await this.sink.append(buildId, [{ text, container: 'kiln' }]);
  }

  /**
   * The stored bytes of an artifact, decompressed; undefined when they are damaged (not gzip, cut
   * short, or larger than any upload kiln reads now).
   */
  private async unpack(artifact: StoredArtifact): Promise<Buffer | undefined> {
    try {
      return await gunzipAsync(artifact.content, { maxOutputLength: this.maxUploadBytes });
    } catch (error) {
      this.unreadable(artifact, `it does not decompress: ${(error as Error).message}`);
      return undefined;
    }
  }

  /** The normalised findings a stored scan holds (gzip of their JSON); undefined when damaged. */
  private async findingsOf(artifact: StoredArtifact): Promise<Finding[] | undefined> {
    const bytes = await this.unpack(artifact);
    if (bytes === undefined) return undefined;
    const findings = readStoredFindings(bytes.toString('utf8'));
    if (findings === undefined) this.unreadable(artifact, 'it is not a list of findings');
    return findings;
  }

  /** A row kiln cannot serve as it wrote it: the operator learns of it from the log. */
  private unreadable(artifact: StoredArtifact, problem: string): void {
    this.logger.warn(
      { build_id: artifact.buildId, kind: artifact.kind, problem },
      'a stored build artifact cannot be read as kiln wrote it',
    );
  }
}

/** The stored SBOM as a document, or why it is served as text instead. */
function servedDocument(bytes: Buffer, text: string): { document: unknown } | { note: string } {
  if (nestsDeeperThan(bytes, MAX_JSON_DEPTH)) {
    return {
      note: `The stored SBOM nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (it was stored before kiln checked), so it is served as text, in partial.`,
    };
  }
  try {
    return { document: JSON.parse(text) as unknown };
  } catch {
    return { note: 'The stored SBOM is not valid JSON, so it is served as text, in partial.' };
  }
}

function damaged(what: 'SBOM' | 'scan'): ConflictError {
  return new ConflictError(`The stored ${what} of this build cannot be read: it is damaged`);
}

/** The build's scan policy (specs stored before scan policies have none). */
export function scanPolicyOf(spec: BuildSpec): ScanPolicy | undefined {
  return spec.scanPolicy ?? undefined;
}

function notRunning(build: BuildEntity): ConflictError {
  return new ConflictError(`Build is ${build.status}; results are accepted while it runs`, {
    status: build.status,
  });
}
