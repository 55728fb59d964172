import { Body, Controller, HttpCode, Ip, Post } from '@nestjs/common';
import { AuthService } from './auth.service.js';
import { AccessTokenDto, LoginDto } from './dto/login.dto.js';
import { ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { ApiErrors } from '../common/openapi.js';
import { Public } from './require-permission.decorator.js';
import type { AccessToken } from './token.service.js';

@ApiTags('auth')
@Controller('auth')
export class AuthController {
  constructor(private readonly auth: AuthService) {}

  @Public()
  @Post('login')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Exchange e-mail and password for an access token',
    description:
      'Needs no token and no X-Tenant-ID. The access token goes in `Authorization: Bearer` on every other route. An unknown e-mail, a wrong password and a disabled user all get the same 401. Failed attempts are counted per e-mail and client address: past KILN_LOGIN_MAX_FAILURES in the window the answer is 429 until it ends.',
    security: [],
  })
  @ApiErrors(200, { type: AccessTokenDto, description: 'The access token' }, [400, 401, 429], {
    401: 'Invalid e-mail or password',
    429: 'Too many requests, or too many failed logins for this e-mail from this address: wait until X-RateLimit-Reset',
  })
  login(@Body() body: LoginDto, @Ip() ip: string): Promise<AccessToken> {
    return this.auth.login(body.email, body.password, ip);
  }
}
