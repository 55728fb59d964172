import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { InvalidRequestError, type ErrorDetails } from './errors.js';

/** Flattens class-validator errors into the Error body's `details` (field path → message). */
export function validationDetails(errors: ValidationError[], prefix = ''): ErrorDetails {
  const details: ErrorDetails = {};
  for (const error of errors) {
    const path = prefix === '' ? error.property : `${prefix}.${error.property}`;
    const messages = Object.values(error.constraints ?? {});
    if (messages.length > 0) details[path] = messages.join('; ');
    if (error.children !== undefined && error.children.length > 0) {
      Object.assign(details, validationDetails(error.children, path));
    }
  }
  return details;
}

export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: invalidRequestFrom,
  });
}

/** One InvalidRequestError naming every bad field, from class-validator's errors. */
export function invalidRequestFrom(errors: ValidationError[]): InvalidRequestError {
  return InvalidRequestError.listing('Invalid request', validationDetails(errors));
}
