import { Injectable, type PipeTransform } from '@nestjs/common';
import { InvalidRequestError } from './errors.js';
import { isUuid } from '../config/formats.js';

/** A path parameter that must be a UUID: 400 with a detail naming it otherwise. */
@Injectable()
export class UuidParamPipe implements PipeTransform<string, string> {
  transform(value: string, metadata: { data?: string }): string {
    const name = metadata.data ?? 'id';
    if (!isUuid(value))
      throw new InvalidRequestError(`${name} must be a UUID`, { [name]: 'must be a UUID' });
    return value.toLowerCase();
  }
}
