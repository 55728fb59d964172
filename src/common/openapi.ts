import { applyDecorators } from '@nestjs/common';
import { API_ERROR_CODES } from './error-body.js';
import {
  ApiBearerAuth,
  ApiHeader,
  ApiProperty,
  ApiPropertyOptional,
  ApiResponse,
  type ApiResponseOptions,
} from './openapi-decorators.js';

/** Security scheme of a user's access token (POST /api/v1/auth/login): every route but login. */
export const ACCESS_TOKEN_SCHEME = 'bearer';
/** Security scheme of the token kiln mints for one build's pod to upload its SBOM or scan. */
export const UPLOAD_TOKEN_SCHEME = 'uploadToken';

/** The spec's Error body (2.6), for the OpenAPI document. */
export class ErrorBodyDto {
  @ApiProperty() error!: string;
  @ApiProperty({ enum: API_ERROR_CODES }) code!: string;
  @ApiProperty({ format: 'date-time' }) timestamp!: string;
  @ApiPropertyOptional({ type: String, nullable: true }) trace_id!: string | null;
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' }, nullable: true })
  details?: Record<string, string>;
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (bad body, parameters or X-Tenant-ID)',
  401: 'Missing or invalid access token',
  403: 'Not a member of the tenant, or the role lacks the permission',
  404: 'No such build in this tenant',
  409: 'Conflict: invalid state transition, or a duplicate',
  413: 'Request body too large',
  429: 'Rate limited: wait until X-RateLimit-Reset (Unix seconds); Retry-After gives the delay',
  500: 'Internal error; trace_id identifies it in the server log',
  503: 'A dependency (the database) is unavailable; retry',
};

const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': {
    description: 'Requests allowed in the current window',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests left in the current window',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Reset': {
    description: 'Unix time, in whole seconds, at which the window resets',
    schema: { type: 'integer' },
  },
};

/**
 * Documents a route's success response and its Error responses (all in the Error shape).
 * `descriptions` replaces the generic description of a status where the route means more by it.
 */
export function ApiErrors(
  successStatus: number | undefined,
  success: ApiResponseOptions | undefined,
  statuses: number[],
  descriptions: Readonly<Partial<Record<number, string>>> = {},
): MethodDecorator {
  const decorators = [...statuses, 500, 503].map((status) =>
    ApiResponse({
      status,
      description: descriptions[status] ?? ERROR_DESCRIPTIONS[status] ?? 'Error',
      type: ErrorBodyDto,
      ...(status === 429
        ? {
            headers: {
              ...RATE_LIMIT_HEADERS,
              'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } },
            },
          }
        : {}),
    }),
  );
  if (successStatus !== undefined && success !== undefined) {
    decorators.push(
      ApiResponse({ ...success, status: successStatus, headers: RATE_LIMIT_HEADERS }),
    );
  }
  return applyDecorators(...decorators);
}

/** A controller whose routes need a bearer token and the X-Tenant-ID header (the tenant the request acts in). */
export function ApiTenantScoped(): ClassDecorator {
  return applyDecorators(
    ApiBearerAuth(ACCESS_TOKEN_SCHEME),
    ApiHeader({
      name: 'X-Tenant-ID',
      required: true,
      description: 'Tenant UUID (not the nil UUID)',
    }),
  );
}
