import { Injectable } from '@nestjs/common';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { BuildSpec } from '../build-methods/build-spec.js';
import {
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  UnauthorizedError,
} from '../common/errors.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import { LogSink } from '../logs/log-sink.js';
import {
  type ArtifactKind,
  BuildArtifactsRepository,
  type StoredArtifact,
} from './artifacts.repository.js';
import { type Finding, normalizeFindings, type Severity, summarize } from './findings.js';
import { evaluatePolicy, type ScanPolicy } from './scan-policy.js';
import { readSbom } from './sbom-document.js';
import { bearerToken, hashUploadToken, newUploadToken } from './upload-token.js';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** An uploaded body as read from the request: its first bytes, and how many arrived in all. */
export interface ReceivedBody {
  readonly bytes: Buffer;
  readonly receivedBytes: number;
}

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
 * The SBOM and scan results of builds (DESIGN.md, "Steps after the image"): upload tokens, what
 * the steps upload, what the API serves, and the scan policy gate. Documents are checked (an SBOM
 * must be SPDX or CycloneDX JSON; a scan report must be the build's scanner's JSON), then stored
 * gzip-compressed. Which tool wrote them comes from the build's spec, never from the upload.
 */
@Injectable()
export class BuildArtifacts {
  constructor(
    private readonly repository: BuildArtifactsRepository,
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly config: KilnConfig,
  ) {}

  /** The largest document kept (KILN_ARTIFACT_MAX_BYTES). */
  get maxBytes(): number {
    return this.config.artifactMaxBytes;
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

  /** Stores an SBOM or a scan report uploaded for a running build (checked, capped, compressed). */
  async receive(buildId: string, kind: ArtifactKind, body: ReceivedBody): Promise<void> {
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

  private async storeSbom(build: BuildEntity, body: ReceivedBody): Promise<boolean> {
    const tool = build.spec.sbomTool ?? 'unknown';
    const truncated = body.receivedBytes > this.maxBytes;
    const kept = truncated ? body.bytes.subarray(0, this.maxBytes) : body.bytes;
    let format: string;
    if (truncated) {
      format = sniffSbomFormat(kept.toString('utf8'));
    } else {
      const sbom = readSbom(kept.toString('utf8'));
      if ('problem' in sbom) {
        throw new InvalidRequestError(`The SBOM is not usable: ${sbom.problem}`, {
          body: sbom.problem,
        });
      }
      format = sbom.format;
    }
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
    if (body.receivedBytes > this.maxBytes) {
      throw new PayloadTooLargeError(
        `The scan report is larger than ${this.maxBytes} bytes (KILN_ARTIFACT_MAX_BYTES)`,
      );
    }
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

  /** GET /builds/{id}/sbom: 404 for another tenant's build and until an SBOM is stored. */
  async sbom(tenantId: string, buildId: string): Promise<SbomView> {
    await this.lifecycle.get(tenantId, buildId);
    const artifact = await this.repository.find(buildId, 'sbom');
    if (artifact === undefined) throw new NotFoundError('No SBOM is stored for this build');
    const text = (await gunzipAsync(artifact.content)).toString('utf8');
    return {
      build_id: buildId,
      tool: artifact.tool,
      format: artifact.format,
      received_bytes: artifact.receivedBytes,
      truncated: artifact.truncated,
      created_at: artifact.createdAt.toISOString(),
      document: artifact.truncated ? null : (JSON.parse(text) as unknown),
      partial: artifact.truncated ? text : null,
      note: artifact.truncated
        ? `The SBOM was ${artifact.receivedBytes} bytes; kiln keeps the first ${Buffer.byteLength(text)} (KILN_ARTIFACT_MAX_BYTES), in partial. It is not valid JSON.`
        : null,
    };
  }

  /** GET /builds/{id}/scan: the normalised findings and the policy's verdict on them. */
  async scan(tenantId: string, buildId: string): Promise<ScanView> {
    const build = await this.lifecycle.get(tenantId, buildId);
    const artifact = await this.repository.find(buildId, 'scan');
    if (artifact === undefined) throw new NotFoundError('No scan is stored for this build');
    const findings = await findingsOf(artifact);
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
    const findings = await findingsOf(artifact);
    const verdict = evaluatePolicy(policy, findings);
    return verdict.violated
      ? { pass: false, message: `${verdict.summary}. ${pushed}` }
      : { pass: true };
  }

  private async say(buildId: string, text: string): Promise<void> {
    await this.sink.append(buildId, [{ text, container: 'kiln' }]);
  }
}

/** The normalised findings a stored scan holds (gzip of their JSON). */
async function findingsOf(artifact: StoredArtifact): Promise<Finding[]> {
  return JSON.parse((await gunzipAsync(artifact.content)).toString('utf8')) as Finding[];
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

/** The format of a truncated SBOM, from its first bytes (it no longer parses). */
function sniffSbomFormat(prefix: string): string {
  if (/"spdxVersion"\s*:/.test(prefix)) return 'spdx-json';
  if (/"bomFormat"\s*:\s*"CycloneDX"/.test(prefix)) return 'cyclonedx-json';
  return 'unknown';
}
