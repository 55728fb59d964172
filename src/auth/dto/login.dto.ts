import { ApiProperty } from '../../common/openapi-decorators.js';
import { IsEmail, IsString, MaxLength, MinLength } from 'class-validator';
import { MAX_PASSWORD_LENGTH } from '../password-hasher.js';

export class LoginDto {
  @ApiProperty({ format: 'email', maxLength: 320 })
  @IsString()
  @MaxLength(320)
  @IsEmail()
  email!: string;

  @IsString()
  @MinLength(1)
  @MaxLength(MAX_PASSWORD_LENGTH)
  @ApiProperty({ minLength: 1, maxLength: MAX_PASSWORD_LENGTH, format: 'password' })
  password!: string;
}

export class AccessTokenDto {
  @ApiProperty({ description: 'JWT access token' }) access_token!: string;
  @ApiProperty({ enum: ['Bearer'] }) token_type!: 'Bearer';
  @ApiProperty({ description: 'Lifetime in seconds' }) expires_in!: number;
}
