// The OpenAPI decorators of kiln's controllers and DTOs, without @nestjs/swagger at run time.
//
// Each decorator here takes the arguments of @nestjs/swagger's decorator of the same name and only
// records where it was applied and with what. The document is generated at build time
// (src/app.openapi.ts): common/openapi-document.ts loads @nestjs/swagger there and applies
// swagger's own decorators with the recorded arguments, in the recorded order, to the same
// classes, methods and properties, before it scans them. A running kiln never loads swagger
// (~13 MB of resident memory beside Nest; docs/adr/0051-api-role-memory.md), and the document is
// what swagger's decorators make of these arguments, not an imitation of them.
import type * as Swagger from '@nestjs/swagger';

export type {
  ApiResponseOptions,
  OpenAPIObject,
  OperationObject,
  PathItemObject,
  ResponseObject,
} from '@nestjs/swagger';

/** The swagger decorator factories kiln uses: their names in @nestjs/swagger. */
export type OpenApiDecoratorName =
  | 'ApiBearerAuth'
  | 'ApiBody'
  | 'ApiExcludeController'
  | 'ApiExtraModels'
  | 'ApiHeader'
  | 'ApiNoContentResponse'
  | 'ApiOperation'
  | 'ApiParam'
  | 'ApiProperty'
  | 'ApiPropertyOptional'
  | 'ApiResponse'
  | 'ApiTags';

/** One application of a decorator, as TypeScript's decorator call made it. */
export interface RecordedOpenApiDecorator {
  readonly name: OpenApiDecoratorName;
  readonly args: readonly unknown[];
  readonly target: object;
  readonly key: string | symbol | undefined;
  readonly descriptor: PropertyDescriptor | undefined;
}

const recorded: RecordedOpenApiDecorator[] = [];

function recorder<N extends OpenApiDecoratorName>(
  name: N,
): (...args: Parameters<(typeof Swagger)[N]>) => ReturnType<(typeof Swagger)[N]> {
  const factory = (...args: unknown[]) =>
    function record(target: object, key?: string | symbol, descriptor?: PropertyDescriptor): void {
      recorded.push({ name, args, target, key, descriptor });
    };
  return factory as unknown as (
    ...args: Parameters<(typeof Swagger)[N]>
  ) => ReturnType<(typeof Swagger)[N]>;
}

export const ApiBearerAuth = recorder('ApiBearerAuth');
export const ApiBody = recorder('ApiBody');
export const ApiExcludeController = recorder('ApiExcludeController');
export const ApiExtraModels = recorder('ApiExtraModels');
export const ApiHeader = recorder('ApiHeader');
export const ApiNoContentResponse = recorder('ApiNoContentResponse');
export const ApiOperation = recorder('ApiOperation');
export const ApiParam = recorder('ApiParam');
export const ApiProperty = recorder('ApiProperty');
export const ApiPropertyOptional = recorder('ApiPropertyOptional');
export const ApiResponse = recorder('ApiResponse');
export const ApiTags = recorder('ApiTags');

/**
 * The `$ref` of a model's schema, as @nestjs/swagger's getSchemaPath makes it for a class without
 * @ApiSchema (kiln uses none): its name.
 */
export function getSchemaPath(model: string | { name: string }): string {
  return `#/components/schemas/${typeof model === 'string' ? model : model.name}`;
}

/**
 * Every decorator recorded since the last call, each once, in the order TypeScript applied them
 * (common/openapi-document.ts applies swagger's in the same order). Classes loaded after a call
 * come with the next one.
 */
export function takeRecordedOpenApiDecorators(): RecordedOpenApiDecorator[] {
  return recorded.splice(0);
}
