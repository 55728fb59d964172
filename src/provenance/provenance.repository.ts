import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** What a tenant decided about provenance (tenant_provenance_settings). */
export interface ProvenanceSettings {
  /** `required`: a build whose provenance cannot be signed or attached fails (ProvenanceFailed). */
  readonly policy: 'optional' | 'required';
  /** A secret reference to the tenant's own PEM signing key; null: kiln's generated key. */
  readonly signingKey: string | null;
  /** Null while the tenant has never set them (the defaults hold). */
  readonly updatedAt: Date | null;
}

/** A key a tenant's statements were signed with (signing_keys). */
export interface StoredSigningKey {
  readonly keyId: string;
  readonly algorithm: string;
  /** SPKI PEM. */
  readonly publicKey: string;
  /** Generated keys only: the PKCS#8 PEM, sealed. */
  readonly privateKeySealed: string | null;
  readonly source: 'generated' | 'secret-manager';
  readonly reference: string | null;
  readonly createdAt: Date;
  /** Set when another key took its place; it still verifies what it signed. */
  readonly retiredAt: Date | null;
}

/** Where one signed document went in a registry. */
export interface Attachment {
  /** `provenance` or `sbom`. */
  readonly kind: string;
  /** `host/path@sha256:…`: the image it refers to. */
  readonly subject: string;
  /** The referrer manifest's digest. */
  readonly digest: string;
  /** How registries list it: the referrers API, or the referrers tag schema's fallback tag. */
  readonly via: 'referrers-api' | 'fallback-tag';
}

/** A build's signed statements as stored (build_provenance). */
export interface StoredProvenance {
  readonly buildId: string;
  readonly tenantId: string;
  readonly keyId: string;
  /** The Sigstore bundle's JSON text, exactly as signed and attached. */
  readonly bundle: string;
  readonly sbomBundle: string | null;
  readonly logDigest: string;
  readonly logLines: number;
  readonly attachments: readonly Attachment[];
  readonly createdAt: Date;
}

interface KeyRow {
  key_id: string;
  algorithm: string;
  public_key: string;
  private_key_sealed: string | null;
  source: 'generated' | 'secret-manager';
  reference: string | null;
  created_at: Date;
  retired_at: Date | null;
}

const KEY_COLUMNS =
  'key_id, algorithm, public_key, private_key_sealed, source, reference, created_at, retired_at';

/**
 * The tables of provenance (migration Provenance1765929600000): tenants' settings and signing
 * keys, and each build's signed statements. Raw SQL: each change is one statement, so two
 * replicas making a tenant's first key at once end with one active key (the partial unique index
 * decides; the loser reads the winner's).
 */
@Injectable()
export class ProvenanceRepository {
  constructor(private readonly dataSource: DataSource) {}

  async settings(tenantId: string): Promise<ProvenanceSettings> {
    const [row] = await this.dataSource.query<
      Array<{ policy: 'optional' | 'required'; signing_key: string | null; updated_at: Date }>
    >(
      'SELECT policy, signing_key, updated_at FROM tenant_provenance_settings WHERE tenant_id = $1',
      [tenantId],
    );
    return {
      policy: row?.policy ?? 'optional',
      signingKey: row?.signing_key ?? null,
      updatedAt: row?.updated_at ?? null,
    };
  }

  async setSettings(
    tenantId: string,
    settings: Pick<ProvenanceSettings, 'policy' | 'signingKey'>,
  ): Promise<ProvenanceSettings> {
    const [row] = await this.dataSource.query<Array<{ updated_at: Date }>>(
      `INSERT INTO tenant_provenance_settings (tenant_id, policy, signing_key)
       VALUES ($1, $2, $3)
       ON CONFLICT (tenant_id) DO UPDATE
          SET policy = EXCLUDED.policy, signing_key = EXCLUDED.signing_key, updated_at = now()
       RETURNING updated_at`,
      [tenantId, settings.policy, settings.signingKey],
    );
    return { ...settings, updatedAt: row!.updated_at };
  }

  /** Every key of the tenant, the active one first, then the newest retired first. */
  async keys(tenantId: string): Promise<StoredSigningKey[]> {
    const rows = await this.dataSource.query<KeyRow[]>(
      `SELECT ${KEY_COLUMNS} FROM signing_keys WHERE tenant_id = $1
        ORDER BY retired_at IS NOT NULL, retired_at DESC, created_at DESC`,
      [tenantId],
    );
    return rows.map(keyOf);
  }

  async key(tenantId: string, keyId: string): Promise<StoredSigningKey | undefined> {
    const [row] = await this.dataSource.query<KeyRow[]>(
      `SELECT ${KEY_COLUMNS} FROM signing_keys WHERE tenant_id = $1 AND key_id = $2`,
      [tenantId, keyId],
    );
    return row === undefined ? undefined : keyOf(row);
  }

  async activeKey(tenantId: string): Promise<StoredSigningKey | undefined> {
    const [row] = await this.dataSource.query<KeyRow[]>(
      `SELECT ${KEY_COLUMNS} FROM signing_keys WHERE tenant_id = $1 AND retired_at IS NULL`,
      [tenantId],
    );
    return row === undefined ? undefined : keyOf(row);
  }

  /**
   * Makes `key` the tenant's active key, retiring the one active before (`replacing`: only when
   * it is still that one, so of two replicas rotating at once one wins). A key the tenant had
   * before (its secret manager's key switched back) becomes active again. Undefined when another
   * writer changed the active key first: the caller reads the active key again.
   */
  async activate(
    tenantId: string,
    key: Omit<StoredSigningKey, 'createdAt' | 'retiredAt'>,
    replacing: string | null,
  ): Promise<StoredSigningKey | undefined> {
    return this.dataSource
      .transaction(async (manager) => {
        // A CTE, so the driver answers the rows (an UPDATE alone answers [rows, count]).
        const [previous] = await manager.query<Array<{ key_id: string }>>(
          `WITH retired AS (
           UPDATE signing_keys SET retired_at = now()
            WHERE tenant_id = $1 AND retired_at IS NULL AND key_id IS DISTINCT FROM $2
            RETURNING key_id)
         SELECT key_id FROM retired`,
          [tenantId, key.keyId],
        );
        if (previous !== undefined && previous.key_id !== replacing) {
          // Someone else's key was active: leave it to them (rolled back).
          throw new LostRace();
        }
        try {
          const [row] = await manager.query<KeyRow[]>(
            `INSERT INTO signing_keys
             (tenant_id, key_id, algorithm, public_key, private_key_sealed, source, reference)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (tenant_id, key_id) DO UPDATE SET retired_at = NULL
           RETURNING ${KEY_COLUMNS}`,
            [
              tenantId,
              key.keyId,
              key.algorithm,
              key.publicKey,
              key.privateKeySealed,
              key.source,
              key.reference,
            ],
          );
          return keyOf(row!);
        } catch (error) {
          // 23505 on the active index: another writer activated a key between our two statements.
          if ((error as { code?: string }).code === '23505') throw new LostRace();
          throw error;
        }
      })
      .catch((error: unknown) => {
        if (error instanceof LostRace) return undefined;
        throw error;
      });
  }

  async provenance(buildId: string): Promise<StoredProvenance | undefined> {
    const [row] = await this.dataSource.query<
      Array<{
        build_id: string;
        tenant_id: string;
        key_id: string;
        bundle: string;
        sbom_bundle: string | null;
        log_digest: string;
        log_lines: number;
        attachments: Attachment[];
        created_at: Date;
      }>
    >(
      `SELECT build_id, tenant_id, key_id, bundle, sbom_bundle, log_digest, log_lines,
              attachments, created_at
         FROM build_provenance WHERE build_id = $1`,
      [buildId],
    );
    if (row === undefined) return undefined;
    return {
      buildId: row.build_id,
      tenantId: row.tenant_id,
      keyId: row.key_id,
      bundle: row.bundle,
      sbomBundle: row.sbom_bundle,
      logDigest: row.log_digest,
      logLines: row.log_lines,
      attachments: row.attachments,
      createdAt: row.created_at,
    };
  }

  /**
   * Stores a build's signed statements once: a second producer (the operator again after a
   * restart) keeps the first's, so what was attached and what is served never differ. Answers
   * what is stored.
   */
  async storeOnce(
    provenance: Omit<StoredProvenance, 'attachments' | 'createdAt'>,
  ): Promise<StoredProvenance> {
    await this.dataSource.query(
      `INSERT INTO build_provenance
         (build_id, tenant_id, key_id, bundle, sbom_bundle, log_digest, log_lines)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (build_id) DO NOTHING`,
      [
        provenance.buildId,
        provenance.tenantId,
        provenance.keyId,
        provenance.bundle,
        provenance.sbomBundle,
        provenance.logDigest,
        provenance.logLines,
      ],
    );
    return (await this.provenance(provenance.buildId))!;
  }

  /** Records where the statements were attached (replacing the list: it is recomputed whole). */
  async setAttachments(buildId: string, attachments: readonly Attachment[]): Promise<void> {
    await this.dataSource.query(
      'UPDATE build_provenance SET attachments = $2::jsonb WHERE build_id = $1',
      [buildId, JSON.stringify(attachments)],
    );
  }
}

class LostRace extends Error {}

function keyOf(row: KeyRow): StoredSigningKey {
  return {
    keyId: row.key_id,
    algorithm: row.algorithm,
    publicKey: row.public_key,
    privateKeySealed: row.private_key_sealed,
    source: row.source,
    reference: row.reference,
    createdAt: row.created_at,
    retiredAt: row.retired_at,
  };
}
