import { Injectable, type PipeTransform } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { InvalidRequestError } from '../common/errors.js';
import { invalidRequestFrom } from '../common/validation.js';
import {
  type CreateBuildRequest,
  ReferenceCreateBuildDto,
  WizardCreateBuildDto,
} from './dto/create-build.dto.js';

/**
 * POST /builds takes two bodies (the reference form and the wizard form). A body with `manifest` or `tenant_id` is the
 * wizard form; anything else is the reference form. Each is validated strictly (unknown fields
 * are refused), so a field of one form sent with the other is an error, not silently dropped.
 */
@Injectable()
export class CreateBuildBodyPipe implements PipeTransform<unknown, Promise<CreateBuildRequest>> {
  async transform(value: unknown): Promise<CreateBuildRequest> {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new InvalidRequestError('The request body must be a JSON object', {
        body: 'must be a JSON object',
      });
    }
    const wizard = 'manifest' in value || 'tenant_id' in value;
    const request: CreateBuildRequest = wizard
      ? { form: 'wizard', body: plainToInstance(WizardCreateBuildDto, value) }
      : { form: 'reference', body: plainToInstance(ReferenceCreateBuildDto, value) };
    const errors = await validate(request.body, { whitelist: true, forbidNonWhitelisted: true });
    if (errors.length > 0) throw invalidRequestFrom(errors);
    return request;
  }
}
