import { Body, Controller, Get, Header, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { NotFoundError } from '../common/errors.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import {
  ProvenanceRepository,
  type ProvenanceSettings,
  type StoredSigningKey,
} from '../provenance/provenance.repository.js';
import { SigningKeys } from '../provenance/signing-keys.js';
import { envelopeStatement, type SignedBundle } from '../provenance/signing.js';
import {
  BuildProvenanceDto,
  ProvenanceSettingsChangeDto,
  ProvenanceSettingsDto,
  SigningKeyDto,
  SigningKeyListDto,
} from './provenance.dto.js';

/** The signed provenance of a build (docs/provenance.md). */
@ApiTags('builds')
@ApiTenantScoped()
@Controller('builds')
export class BuildProvenanceController {
  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly provenance: ProvenanceRepository,
  ) {}

  @Get(':id/provenance')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: "The build's signed provenance",
    description:
      "The in-toto statement with its SLSA Provenance v1 predicate that kiln made from its own records when the build succeeded, the Sigstore bundle it signed with the tenant's key, the SBOM attestation, the digest of the stored log it covers, and where they were attached (`build:read`). Verify with `kiln verify <image>` or cosign (docs/provenance.md). 404 for a build that has none: provenance is made when a build succeeds (a build that failed with ProvenanceFailed has one when it was signed but could not be attached).",
  })
  @ApiErrors(
    200,
    { type: BuildProvenanceDto, description: 'The provenance' },
    [400, 401, 403, 404, 429],
    {
      404: 'No such build in this tenant, or it has no provenance (it did not succeed, or its provenance could not be signed)',
    },
  )
  async get(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildProvenanceDto> {
    const build = await this.lifecycle.get(tenant.tenantId, id);
    const stored = await this.provenance.provenance(build.id);
    if (stored === undefined) {
      throw new NotFoundError('This build has no provenance: it is made when a build succeeds', {
        status: build.status,
      });
    }
    const bundle = JSON.parse(stored.bundle) as SignedBundle;
    return {
      build_id: build.id,
      state: build.provenance,
      key_id: stored.keyId,
      statement: envelopeStatement(bundle),
      bundle: bundle as unknown as Record<string, unknown>,
      sbom_bundle:
        stored.sbomBundle === null
          ? null
          : (JSON.parse(stored.sbomBundle) as Record<string, unknown>),
      log: { digest: `sha256:${stored.logDigest}`, lines: stored.logLines },
      attachments: stored.attachments.map((attachment) => ({ ...attachment })),
      created_at: stored.createdAt.toISOString(),
    };
  }
}

/** The tenant's public signing keys, and their rotation (docs/provenance.md, "Keys"). */
@ApiTags('provenance')
@ApiTenantScoped()
@Controller('signing-keys')
export class SigningKeysController {
  constructor(private readonly keys: SigningKeys) {}

  @Get()
  @RequirePermission('build:read')
  @ApiOperation({
    summary: "The tenant's signing keys",
    description:
      "Every key the tenant's provenance was signed with, public halves only (`build:read`): the active one first, then retired ones, which still verify what they signed. Empty until the tenant's first build succeeds or its key is rotated.",
  })
  @ApiErrors(200, { type: SigningKeyListDto, description: 'The keys' }, [400, 401, 403, 429])
  async list(@CurrentTenant() tenant: TenantContext): Promise<SigningKeyListDto> {
    return { keys: (await this.keys.keys(tenant.tenantId)).map(toKey) };
  }

  @Get(':keyId/pem')
  @RequirePermission('build:read')
  @Header('Content-Type', 'application/x-pem-file')
  @ApiOperation({
    summary: 'A public signing key in PEM',
    description:
      'The public key alone, as `cosign verify-attestation --key` reads it (`build:read`). 404 for a key id the tenant never signed with.',
  })
  @ApiErrors(
    200,
    {
      description: 'The SPKI public key, PEM',
      content: { 'application/x-pem-file': { schema: { type: 'string' } } },
    },
    [400, 401, 403, 404, 429],
  )
  async pem(
    @CurrentTenant() tenant: TenantContext,
    @Param('keyId') keyId: string,
  ): Promise<string> {
    return (await this.keys.key(tenant.tenantId, keyId)).publicKey;
  }

  @Post('rotate')
  @HttpCode(201)
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Rotate the tenant's generated signing key",
    description:
      'A new ECDSA P-256 key signs from now on; the one before is retired and still verifies what it signed (`settings:manage`). 409 when the tenant signs with its own key from its secret manager: rotate it there.',
  })
  @ApiErrors(
    201,
    { type: SigningKeyDto, description: 'The new active key' },
    [400, 401, 403, 409, 429],
    {
      409: 'The tenant signs with its own key (rotate it in its secret manager), or another rotation won',
    },
  )
  async rotate(@CurrentTenant() tenant: TenantContext): Promise<SigningKeyDto> {
    return toKey(await this.keys.rotate(tenant.tenantId));
  }
}

/** Whether the tenant requires provenance, and which key it signs with. */
@ApiTags('settings')
@ApiTenantScoped()
@Controller('settings/provenance')
export class ProvenanceSettingsController {
  constructor(private readonly keys: SigningKeys) {}

  @Get()
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Read the tenant's provenance settings",
    description: 'Its policy and the source of its signing key (`settings:manage`).',
  })
  @ApiErrors(
    200,
    { type: ProvenanceSettingsDto, description: 'The settings' },
    [400, 401, 403, 429],
  )
  async get(@CurrentTenant() tenant: TenantContext): Promise<ProvenanceSettingsDto> {
    return toSettings(await this.keys.settings(tenant.tenantId));
  }

  @Put()
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Change the tenant's provenance settings",
    description:
      "What is sent changes (`settings:manage`). `provenance: required` fails a build whose provenance cannot be signed, stored or attached (ProvenanceFailed). `signing_key` is a secret reference to the tenant's own ECDSA P-256 private key in PEM: it is read now through the tenant's secret manager and refused (400) unless it is one; null goes back to the key kiln generates.",
  })
  @ApiErrors(
    200,
    { type: ProvenanceSettingsDto, description: 'The settings now' },
    [400, 401, 403, 429],
  )
  async set(
    @CurrentTenant() tenant: TenantContext,
    @Body() body: ProvenanceSettingsChangeDto,
  ): Promise<ProvenanceSettingsDto> {
    return toSettings(
      await this.keys.setSettings(tenant.tenantId, {
        ...(body.provenance === undefined ? {} : { policy: body.provenance }),
        ...(body.signing_key === undefined ? {} : { signingKey: body.signing_key }),
      }),
    );
  }
}

function toKey(key: StoredSigningKey): SigningKeyDto {
  return {
    key_id: key.keyId,
    algorithm: key.algorithm,
    public_key: key.publicKey,
    source: key.source,
    active: key.retiredAt === null,
    created_at: key.createdAt.toISOString(),
    retired_at: key.retiredAt === null ? null : key.retiredAt.toISOString(),
  };
}

function toSettings(settings: ProvenanceSettings): ProvenanceSettingsDto {
  return {
    provenance: settings.policy,
    signing_key: settings.signingKey,
    updated_at: settings.updatedAt === null ? null : settings.updatedAt.toISOString(),
  };
}
