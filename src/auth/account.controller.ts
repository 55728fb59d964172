import { Body, Controller, Get, HttpCode, Ip, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { UnauthorizedError } from '../common/errors.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors } from '../common/openapi.js';
import { ApiTokensRepository } from './api-tokens.repository.js';
import { AuthService } from './auth.service.js';
import { AccessTokenDto } from './dto/login.dto.js';
import { CallerDto, ChangePasswordDto } from './dto/account.dto.js';
import { RequirePermission } from './require-permission.decorator.js';
import { type AuthenticatedUser, CurrentUser } from './tenant-context.js';
import type { AccessToken } from './token.service.js';
import { UsersRepository } from './users.repository.js';

/** The caller's own account: who it is, and its password. */
@ApiTags('auth')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('auth')
export class AccountController {
  constructor(
    private readonly auth: AuthService,
    private readonly users: UsersRepository,
    private readonly tokens: ApiTokensRepository,
  ) {}

  @Get('me')
  @RequirePermission('tenant:list')
  @ApiOperation({
    summary: 'Who the caller is',
    description:
      'The user of the bearer token, and the API token itself when the request was made with one (`tenant:list`, which every enabled user holds and an API token may use). Needs no X-Tenant-ID. What `kiln whoami` shows.',
  })
  @ApiErrors(200, { type: CallerDto, description: 'The caller' }, [400, 401, 429], {
    401: 'Missing or invalid token, or its user was deleted or disabled',
  })
  async me(@CurrentUser() caller: AuthenticatedUser): Promise<CallerDto> {
    const user = await this.users.findById(caller.userId);
    if (user === undefined)
      throw new UnauthorizedError("The access token's user no longer exists or is disabled");
    const scope = caller.apiToken;
    const token =
      scope === undefined
        ? undefined
        : (await this.tokens.ownedBy(scope.tenantId, caller.userId)).find((t) => t.id === scope.id);
    return {
      user_id: user.id,
      email: user.email,
      system_admin: user.systemAdmin,
      token:
        token === undefined
          ? null
          : {
              id: token.id,
              name: token.name,
              tenant_id: token.tenantId,
              permissions: [...token.permissions],
              expires_at: token.expiresAt.toISOString(),
            },
    };
  }

  @Post('password')
  @HttpCode(200)
  @RequirePermission('account:manage')
  @ApiOperation({
    summary: 'Change your password',
    description:
      "Sets the caller's password, given the current one (`account:manage`, which every enabled user holds and no API token does). Wrong guesses count against the same limit as logins. Every access token issued before the change is refused from then on, on every replica; the answer carries a new one. API tokens stay valid: revoke them on their own.",
  })
  @ApiErrors(
    200,
    { type: AccessTokenDto, description: 'A new access token' },
    [400, 401, 403, 429],
    {
      400: 'The current password is not right, or the new one is too short or too long',
      403: 'The request was made with an API token',
      429: 'Too many wrong passwords for this user from this address: wait until X-RateLimit-Reset',
    },
  )
  changePassword(
    @CurrentUser() caller: AuthenticatedUser,
    @Body() body: ChangePasswordDto,
    @Ip() ip: string,
  ): Promise<AccessToken> {
    return this.auth.changePassword(caller.userId, body.current_password, body.new_password, ip);
  }
}
