import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { SEVERITIES, type Severity } from '../manifest/severities.js';

/** GET /builds/{id}/sbom. */
export class SbomDto {
  @ApiProperty({ format: 'uuid' }) build_id!: string;
  @ApiProperty({ enum: ['syft', 'grype', 'trivy'] }) tool!: string;
  @ApiProperty({ enum: ['spdx-json', 'cyclonedx-json', 'unknown'] }) format!: string;
  @ApiProperty({ description: 'Bytes the SBOM step uploaded, before truncation' })
  received_bytes!: number;
  @ApiProperty({ description: 'True when the SBOM was larger than KILN_ARTIFACT_MAX_BYTES' })
  truncated!: boolean;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    nullable: true,
    description:
      'The SPDX or CycloneDX JSON document; null when truncated or when the stored text cannot be served as JSON (see note)',
  })
  document!: unknown;
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description:
      'When document is null: the stored text (when truncated, the first KILN_ARTIFACT_MAX_BYTES bytes, not valid JSON)',
  })
  partial!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true, description: 'Why document is null' })
  note!: string | null;
}

/** One vulnerability, the same shape whatever the scanner. */
export class FindingDto {
  @ApiProperty({ description: 'CVE-…, GHSA-… or the scanner’s own id' }) id!: string;
  @ApiProperty() package!: string;
  @ApiProperty() version!: string;
  @ApiPropertyOptional({ type: String, nullable: true }) fixed_version!: string | null;
  @ApiProperty({ enum: SEVERITIES }) severity!: Severity;
}

export class ScanPolicyResultDto {
  @ApiPropertyOptional({ enum: SEVERITIES, nullable: true }) fail_on!: Severity | null;
  @ApiProperty({ type: [String] }) ignore!: string[];
  @ApiProperty({ description: 'True when the findings exceed the policy (the build failed)' })
  violated!: boolean;
  @ApiPropertyOptional({ type: String, nullable: true }) summary!: string | null;
}

/** GET /builds/{id}/scan. */
export class ScanDto {
  @ApiProperty({ format: 'uuid' }) build_id!: string;
  @ApiProperty({ enum: ['trivy', 'clair', 'grype', 'snyk'] }) tool!: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'integer', minimum: 0 },
    description: `Findings per severity (${SEVERITIES.join(', ')})`,
  })
  summary!: Record<Severity, number>;
  @ApiProperty({ type: [FindingDto], description: 'Sorted by severity, then id' })
  findings!: FindingDto[];
  @ApiPropertyOptional({ type: ScanPolicyResultDto, nullable: true })
  policy!: ScanPolicyResultDto | null;
}
