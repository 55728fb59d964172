import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { IsIn, IsOptional, IsString, ValidateIf } from 'class-validator';

/** Where a signed statement was attached in a registry. */
export class AttachmentDto {
  @ApiProperty({ enum: ['provenance', 'sbom'] })
  kind!: string;
  @ApiProperty({ description: 'The image it refers to, `host/repository@sha256:…`' })
  subject!: string;
  @ApiProperty({ pattern: '^sha256:[0-9a-f]{64}$', description: "The referrer manifest's digest" })
  digest!: string;
  @ApiProperty({
    enum: ['referrers-api', 'fallback-tag'],
    description:
      'How the registry lists it: its referrers API, or the referrers tag schema (tag `sha256-<hex>` of the image digest) for a registry without one',
  })
  via!: string;
}

export class LogDigestDto {
  @ApiProperty({ pattern: '^sha256:[0-9a-f]{64}$' })
  digest!: string;
  @ApiProperty({
    minimum: 0,
    description:
      'The lines it covers, from offset 0 (kiln says where it attached the provenance after them)',
  })
  lines!: number;
}

/** GET /builds/{id}/provenance. */
export class BuildProvenanceDto {
  @ApiProperty({ format: 'uuid' })
  build_id!: string;
  @ApiProperty({
    description: "The build's `provenance` field: `attached`, `stored-only` or `failed: …`",
    type: String,
    nullable: true,
  })
  state!: string | null;
  @ApiProperty({
    pattern: '^[0-9a-f]{64}$',
    description: 'The signing key (GET /signing-keys): hex SHA-256 of its public key (SPKI DER)',
  })
  key_id!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description:
      'The in-toto Statement v1 with its SLSA Provenance v1 predicate, as signed (the payload of the bundle)',
  })
  statement!: Record<string, unknown>;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description:
      'The Sigstore bundle (v0.3, DSSE envelope, public-key verification material) attached to the image',
  })
  bundle!: Record<string, unknown>;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    nullable: true,
    description: 'The signed SBOM attestation (a Sigstore bundle), when the build stored an SBOM',
  })
  sbom_bundle!: Record<string, unknown> | null;
  @ApiProperty({ type: LogDigestDto })
  log!: LogDigestDto;
  @ApiProperty({ type: [AttachmentDto] })
  attachments!: AttachmentDto[];
  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

/** A key a tenant's statements are or were signed with. */
export class SigningKeyDto {
  @ApiProperty({ pattern: '^[0-9a-f]{64}$', description: 'Hex SHA-256 of the SPKI DER' })
  key_id!: string;
  @ApiProperty({ enum: ['ecdsa-p256-sha256'] })
  algorithm!: string;
  @ApiProperty({ description: 'The public key, PEM (SPKI): what `cosign --key` reads' })
  public_key!: string;
  @ApiProperty({
    enum: ['generated', 'secret-manager'],
    description:
      "Made by kiln (its private half sealed in kiln's database) or read from the tenant's secret manager",
  })
  source!: string;
  @ApiProperty({ description: 'True for the key new statements are signed with' })
  active!: boolean;
  @ApiProperty({ format: 'date-time' })
  created_at!: string;
  @ApiProperty({
    type: String,
    format: 'date-time',
    nullable: true,
    description: 'When another key took its place; it still verifies what it signed',
  })
  retired_at!: string | null;
}

export class SigningKeyListDto {
  @ApiProperty({
    type: [SigningKeyDto],
    description: 'The active key first, then retired ones, newest first',
  })
  keys!: SigningKeyDto[];
}

/** GET|PUT /settings/provenance. */
export class ProvenanceSettingsDto {
  @ApiProperty({
    enum: ['optional', 'required'],
    description:
      '`required`: a build whose provenance cannot be signed, stored or attached fails with ProvenanceFailed. `optional` (the default): it succeeds, its `provenance` field saying `failed: …`',
  })
  provenance!: string;
  @ApiProperty({
    type: String,
    nullable: true,
    description:
      "A secret reference to the tenant's own ECDSA P-256 private key (PEM) in its secret manager; null: a key kiln generates and keeps sealed",
  })
  signing_key!: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  updated_at!: string | null;
}

/** PUT /settings/provenance: what is sent changes. */
export class ProvenanceSettingsChangeDto {
  @ApiPropertyOptional({ enum: ['optional', 'required'] })
  @IsOptional()
  @IsIn(['optional', 'required'])
  provenance?: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'A secret reference, or null for the key kiln generates',
  })
  @ValidateIf((_, value) => value !== null && value !== undefined)
  @IsString()
  signing_key?: string | null;
}
