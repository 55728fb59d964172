import { Body, Controller, HttpCode, Ip, Post } from '@nestjs/common';
import { AuthService } from './auth.service.js';
import { AccessTokenDto, LoginDto } from './dto/login.dto.js';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
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
  @ApiOperation({ summary: 'Exchange e-mail and password for an access token' })
  @ApiErrors(200, { type: AccessTokenDto }, [400, 401, 429])
  login(@Body() body: LoginDto, @Ip() ip: string): Promise<AccessToken> {
    return this.auth.login(body.email, body.password, ip);
  }
}
