import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { ApiTokens } from './api-tokens.js';
import type { StoredApiToken } from './api-tokens.repository.js';
import {
  ApiTokenDto,
  ApiTokenListDto,
  CreateApiTokenDto,
  CreatedApiTokenDto,
} from './dto/api-token.dto.js';
import { RequirePermission } from './require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from './tenant-context.js';

const toApiToken = (token: StoredApiToken): ApiTokenDto => ({
  id: token.id,
  name: token.name,
  tenant_id: token.tenantId,
  permissions: [...token.permissions],
  created_at: token.createdAt.toISOString(),
  expires_at: token.expiresAt.toISOString(),
  last_used_at: token.lastUsedAt?.toISOString() ?? null,
});

/** The caller's API tokens in the tenant of X-Tenant-ID (`token:manage`). */
@ApiTags('tokens')
@ApiTenantScoped()
@Controller('tokens')
export class ApiTokensController {
  constructor(private readonly tokens: ApiTokens) {}

  @Post()
  @RequirePermission('token:manage')
  @ApiOperation({
    summary: 'Create an API token',
    description:
      "A bearer token for machines and CI that acts for the caller in this tenant only, with the permissions asked for: at most the caller's role's, never `token:manage` (403 beyond the role, 400 for `token:manage`). It expires after `expires_in_days` (at most KILN_API_TOKEN_MAX_DAYS). The token is in this answer only; kiln keeps its SHA-256. Each request made with it needs the permission both in the token and in the user's role at that moment. With it, X-Tenant-ID may be left out.",
  })
  @ApiErrors(
    201,
    { type: CreatedApiTokenDto, description: 'The token, shown this once' },
    [400, 401, 403, 409, 429],
    {
      403: "A permission asked for is beyond the caller's role, or the request was made with an API token",
      409: 'The caller holds the most tokens a member may in this tenant (100)',
    },
  )
  async create(
    @CurrentTenant() caller: TenantContext,
    @Body() body: CreateApiTokenDto,
  ): Promise<CreatedApiTokenDto> {
    const { stored, token } = await this.tokens.create(caller, {
      name: body.name,
      permissions: body.permissions,
      expiresInDays: body.expires_in_days,
    });
    return { ...toApiToken(stored), token };
  }

  @Get()
  @RequirePermission('token:manage')
  @ApiOperation({
    summary: 'List your API tokens',
    description:
      "The caller's tokens in this tenant, newest first, expired ones included, without the tokens themselves (`token:manage`).",
  })
  @ApiErrors(200, { type: ApiTokenListDto, description: 'The tokens' }, [400, 401, 403, 429])
  async list(@CurrentTenant() caller: TenantContext): Promise<ApiTokenListDto> {
    return { tokens: (await this.tokens.list(caller)).map(toApiToken) };
  }

  @Delete(':id')
  @HttpCode(204)
  @RequirePermission('token:manage')
  @ApiOperation({
    summary: 'Revoke an API token',
    description:
      "Deletes one of the caller's tokens in this tenant (`token:manage`): every replica refuses it (401) as soon as it hears of the change, within a second.",
  })
  @ApiNoContentResponse({ description: 'Revoked' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 429], {
    404: 'The caller has no token with this id in this tenant',
  })
  async revoke(
    @CurrentTenant() caller: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<void> {
    await this.tokens.revoke(caller, id);
  }
}
