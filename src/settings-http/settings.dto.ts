import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { IsInt, IsOptional, Max, Min, ValidateIf } from 'class-validator';
import { REGISTRY_TYPES, SECRET_MANAGER_TYPES } from '../manifest/types.js';

const SETTINGS_DESCRIPTION =
  'The settings of this type, as docs/secret-managers-and-registries.md lists them: addresses, file paths and secret references, never a credential (URLs without userinfo)';

/** Settings as stored, by type: what both lists show. */
abstract class StoredSettingsDto {
  @ApiProperty({ type: 'object', additionalProperties: true, description: SETTINGS_DESCRIPTION })
  settings!: Record<string, unknown>;

  @ApiProperty({ format: 'date-time' })
  updated_at!: string;
}

export class SecretManagerSettingsDto extends StoredSettingsDto {
  @ApiProperty({ enum: SECRET_MANAGER_TYPES })
  type!: string;
}

export class SecretManagerListDto {
  @ApiProperty({ type: [SecretManagerSettingsDto] })
  secret_managers!: SecretManagerSettingsDto[];
}

export class RegistrySettingsDto extends StoredSettingsDto {
  @ApiProperty({ enum: REGISTRY_TYPES })
  type!: string;
}

export class RegistryListDto {
  @ApiProperty({ type: [RegistrySettingsDto] })
  registries!: RegistrySettingsDto[];
}

/** A tenant's place in admission (docs/admission.md). */
export class AdmissionSettingsDto {
  @ApiProperty({ format: 'uuid' })
  tenant_id!: string;

  @ApiProperty({
    minimum: 1,
    maximum: 1000,
    description:
      "The tenant's share of build slots against other tenants' (weight 2 runs twice as many)",
  })
  weight!: number;

  @ApiProperty({
    type: Number,
    nullable: true,
    minimum: 0,
    description:
      "The tenant's own limit on running builds; null: the installation's KILN_TENANT_MAX_RUNNING",
  })
  max_running!: number | null;
}

/** PATCH /tenants/{id}/admission: what is sent changes; `max_running: null` restores the default. */
export class AdmissionChangeDto {
  @ApiPropertyOptional({ minimum: 1, maximum: 1000 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  weight?: number;

  @ApiPropertyOptional({ type: Number, nullable: true, minimum: 0, maximum: 100_000 })
  @ValidateIf((_, value) => value !== null && value !== undefined)
  @IsInt()
  @Min(0)
  @Max(100_000)
  max_running?: number | null;
}
