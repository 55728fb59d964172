import { qualifiedKind, qualifiedResource, type ResourceType } from './types.js';

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

/** An API error carried as the real server's `Status` body with its HTTP code. */
export class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusBody['details'],
  ) {
    super(message);
  }

  toStatus(): StatusBody {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      // A webhook may deny without a reason; the real Status then has none.
      ...(this.reason !== '' ? { reason: this.reason } : {}),
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

const detailsOf = (type: ResourceType, name: string): StatusBody['details'] => ({
  name,
  ...(type.group ? { group: type.group } : {}),
  kind: type.plural,
});

export const notFound = (type: ResourceType, name: string): StatusError =>
  new StatusError(
    404,
    'NotFound',
    `${qualifiedResource(type)} "${name}" not found`,
    detailsOf(type, name),
  );

export const alreadyExists = (type: ResourceType, name: string): StatusError =>
  new StatusError(
    409,
    'AlreadyExists',
    `${qualifiedResource(type)} "${name}" already exists`,
    detailsOf(type, name),
  );

export const conflict = (type: ResourceType, name: string, why: string): StatusError =>
  new StatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(type)} "${name}": ${why}`,
    detailsOf(type, name),
  );

export const MODIFIED_CONFLICT =
  'the object has been modified; please apply your changes to the latest version and try again';

export const badRequest = (message: string): StatusError =>
  new StatusError(400, 'BadRequest', message);

export const gone = (message: string, reason = 'Expired'): StatusError =>
  new StatusError(410, reason, message);

export const methodNotAllowed = (): StatusError =>
  new StatusError(
    405,
    'MethodNotAllowed',
    'the server does not allow this method on the requested resource',
  );

export const unsupportedMediaType = (contentType: string, accepted: string[]): StatusError =>
  new StatusError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
    { causes: [{ reason: 'UnexpectedServerResponse', message: contentType }] },
  );

/** One field error, rendered as the real server's field.Error does. */
export interface FieldError {
  field: string;
  reason:
    | 'FieldValueRequired'
    | 'FieldValueInvalid'
    | 'FieldValueNotSupported'
    | 'FieldValueTooLong'
    | 'FieldValueTooMany'
    | 'FieldValueForbidden'
    | 'FieldValueDuplicate'
    | 'FieldValueTypeInvalid';
  /** The text after `<field>: `, e.g. `Required value`. */
  detail: string;
}

/** Go's %q-ish rendering of a value inside a field error. */
export function goValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

export const fieldErrors = {
  required: (field: string, extra = ''): FieldError => ({
    field,
    reason: 'FieldValueRequired',
    detail: extra ? `Required value: ${extra}` : 'Required value',
  }),
  invalid: (field: string, value: unknown, why: string): FieldError => ({
    field,
    reason: 'FieldValueInvalid',
    detail: `Invalid value: ${goValue(value)}: ${why}`,
  }),
  /** An Invalid whose value is already rendered (e.g. Go's `0x0`). */
  invalidRendered: (field: string, rendered: string, why: string): FieldError => ({
    field,
    reason: 'FieldValueInvalid',
    detail: `Invalid value: ${rendered}: ${why}`,
  }),
  notSupported: (field: string, value: unknown, supported: unknown[]): FieldError => ({
    field,
    reason: 'FieldValueNotSupported',
    detail: `Unsupported value: ${goValue(value)}: supported values: ${supported.map(goValue).join(', ')}`,
  }),
  duplicate: (field: string, value: unknown): FieldError => ({
    field,
    reason: 'FieldValueDuplicate',
    detail: `Duplicate value: ${goValue(value)}`,
  }),
  forbidden: (field: string, why: string): FieldError => ({
    field,
    reason: 'FieldValueForbidden',
    detail: `Forbidden: ${why}`,
  }),
  tooLong: (field: string, max: number): FieldError => ({
    field,
    reason: 'FieldValueTooLong',
    detail: `Too long: may not be longer than ${max}`,
  }),
  tooMany: (field: string, actual: number, max: number): FieldError => ({
    field,
    reason: 'FieldValueTooMany',
    detail: `Too many: ${actual}: must have at most ${max} items`,
  }),
};

/** 422 Invalid, worded as `Build.kiln.dev "b1" is invalid: <field>: <detail>[, …]`. */
export function invalid(type: ResourceType, name: string, errors: FieldError[]): StatusError {
  const rendered = errors.map((e) => `${e.field}: ${e.detail}`);
  const list = rendered.length === 1 ? (rendered[0] ?? '') : `[${rendered.join(', ')}]`;
  return new StatusError(422, 'Invalid', `${qualifiedKind(type)} "${name}" is invalid: ${list}`, {
    name,
    ...(type.group ? { group: type.group } : {}),
    kind: type.kind,
    causes: errors.map((e) => ({ reason: e.reason, message: e.detail, field: e.field })),
  });
}
