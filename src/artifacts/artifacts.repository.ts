import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** What the steps after the image upload: an SBOM, and a scanner's report. */
export const ARTIFACT_KINDS = ['sbom', 'scan'] as const;
export type ArtifactKind = (typeof ARTIFACT_KINDS)[number];

export interface NewArtifact {
  readonly buildId: string;
  readonly kind: ArtifactKind;
  readonly tool: string;
  readonly format: string;
  /** gzip of the stored document. */
  readonly content: Buffer;
  /** Bytes uploaded, before truncation and compression. */
  readonly receivedBytes: number;
  readonly truncated: boolean;
  readonly summary: Record<string, number> | null;
}

export interface StoredArtifact extends NewArtifact {
  readonly createdAt: Date;
}

export interface UploadTokenRow {
  readonly buildId: string;
  readonly kind: ArtifactKind;
  readonly expired: boolean;
}

interface RawArtifact {
  build_id: string;
  kind: ArtifactKind;
  tool: string;
  format: string;
  content: Buffer;
  received_bytes: number;
  truncated: boolean;
  summary: Record<string, number> | null;
  created_at: Date;
}

/**
 * The tables of the steps after the image (migration BuildArtifacts1764633600000): the stored
 * SBOM and scan of each build, and the upload tokens minted for its pod, by hash. Times come from
 * the database's clock, so the API and the operator never compare two clocks.
 */
@Injectable()
export class BuildArtifactsRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Stores token hashes valid for `ttlSeconds` from now; false when the build does not exist. */
  async insertTokens(
    buildId: string,
    tokens: ReadonlyArray<{ kind: ArtifactKind; hash: Buffer }>,
    ttlSeconds: number,
  ): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO build_upload_tokens (token_hash, build_id, kind, expires_at)
       SELECT t.hash, b.id, t.kind, now() + make_interval(secs => $4)
       FROM builds b, unnest($2::bytea[], $3::text[]) AS t(hash, kind)
       WHERE b.id = $1
       RETURNING 1`,
      [buildId, tokens.map((t) => t.hash), tokens.map((t) => t.kind), ttlSeconds],
    );
    return rows.length === tokens.length;
  }

  async findToken(hash: Buffer): Promise<UploadTokenRow | undefined> {
    const rows = await this.dataSource.query<
      Array<{ build_id: string; kind: ArtifactKind; expired: boolean }>
    >(
      `SELECT build_id, kind, expires_at <= now() AS expired
       FROM build_upload_tokens WHERE token_hash = $1`,
      [hash],
    );
    const row = rows[0];
    return row === undefined
      ? undefined
      : { buildId: row.build_id, kind: row.kind, expired: row.expired };
  }

  /**
   * Stores (or replaces) a build's artifact of one kind, only while the build runs: a report that
   * arrives after the build ended could no longer be gated. False when it is not running.
   */
  async storeWhileRunning(artifact: NewArtifact): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO build_artifacts
         (build_id, kind, tool, format, content, received_bytes, truncated, summary)
       SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM builds
       WHERE id = $1 AND status = 'in_progress'
       ON CONFLICT (build_id, kind) DO UPDATE SET
         tool = EXCLUDED.tool, format = EXCLUDED.format, content = EXCLUDED.content,
         received_bytes = EXCLUDED.received_bytes, truncated = EXCLUDED.truncated,
         summary = EXCLUDED.summary, created_at = now()
       RETURNING 1`,
      [
        artifact.buildId,
        artifact.kind,
        artifact.tool,
        artifact.format,
        artifact.content,
        artifact.receivedBytes,
        artifact.truncated,
        artifact.summary === null ? null : JSON.stringify(artifact.summary),
      ],
    );
    return rows.length === 1;
  }

  async find(buildId: string, kind: ArtifactKind): Promise<StoredArtifact | undefined> {
    const rows = await this.dataSource.query<RawArtifact[]>(
      `SELECT build_id, kind, tool, format, content, received_bytes, truncated, summary, created_at
       FROM build_artifacts WHERE build_id = $1 AND kind = $2`,
      [buildId, kind],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    return {
      buildId: row.build_id,
      kind: row.kind,
      tool: row.tool,
      format: row.format,
      content: row.content,
      receivedBytes: row.received_bytes,
      truncated: row.truncated,
      summary: row.summary,
      createdAt: row.created_at,
    };
  }
}
