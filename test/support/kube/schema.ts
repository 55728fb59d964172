import { fieldErrors, type FieldError } from './errors.js';
import { clone, isObject, type Json, type JsonObject, type JsonSchema } from './types.js';

const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/** Names of the fields a structural schema would prune, as `spec.foo` paths. */
export function unknownFields(value: Json, schema: JsonSchema, path = ''): string[] {
  if (schema['x-kubernetes-preserve-unknown-fields'] && !schema.properties) return [];
  if (Array.isArray(value)) {
    const items = schema.items;
    return items ? value.flatMap((v, i) => unknownFields(v, items, `${path}[${i}]`)) : [];
  }
  if (!isObject(value)) return [];
  const result: string[] = [];
  for (const [key, child] of Object.entries(value)) {
    if (path === '' && (key === 'apiVersion' || key === 'kind' || key === 'metadata')) continue;
    const childSchema =
      schema.properties?.[key] ??
      (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (childSchema) result.push(...unknownFields(child, childSchema, join(path, key)));
    else if (
      !schema['x-kubernetes-preserve-unknown-fields'] &&
      schema.additionalProperties !== true
    )
      result.push(join(path, key));
  }
  return result;
}

/**
 * Prunes unknown fields and nulls of non-nullable fields, then applies defaults, as the
 * apiextensions server does for structural schemas (decode → prune → default → validate).
 */
export function pruneAndDefault(value: Json, schema: JsonSchema, root = true): Json {
  if (Array.isArray(value)) {
    const items = schema.items;
    return items ? value.map((v) => pruneAndDefault(v, items, false)) : value;
  }
  if (!isObject(value)) return value;
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const additional = isObject(schema.additionalProperties)
    ? (schema.additionalProperties as JsonSchema)
    : undefined;
  const result: JsonObject = {};
  for (const [key, child] of Object.entries(value)) {
    if (root && (key === 'apiVersion' || key === 'kind' || key === 'metadata')) {
      result[key] = child;
      continue;
    }
    const childSchema = schema.properties?.[key] ?? additional;
    if (!childSchema) {
      if (preserve || schema.additionalProperties === true) result[key] = child;
      continue;
    }
    if (child === null && !childSchema.nullable) continue;
    result[key] = pruneAndDefault(child, childSchema, false);
  }
  for (const [key, childSchema] of Object.entries(schema.properties ?? {})) {
    if (!(key in result) && childSchema.default !== undefined)
      result[key] = pruneAndDefault(clone(childSchema.default), childSchema, false);
  }
  return result;
}

const typeName = (value: Json): string => {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
};

function typeMatches(value: Json, schema: JsonSchema): boolean {
  if (schema['x-kubernetes-int-or-string'])
    return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value));
  switch (schema.type) {
    case undefined:
      return true;
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
  }
}

/** Validates against an openAPIV3Schema, with the real server's field error wording. */
export function validateSchema(value: Json, schema: JsonSchema, path = ''): FieldError[] {
  if (value === null && schema.nullable) return [];
  if (!typeMatches(value, schema)) {
    const expected = schema['x-kubernetes-int-or-string'] ? 'integer,string' : (schema.type ?? '');
    // Worded as Invalid, but of its own type: it keeps the CEL rules from running (cel.ts).
    return [
      {
        ...fieldErrors.invalid(
          path,
          typeName(value),
          `${path} in body must be of type ${expected}: "${typeName(value)}"`,
        ),
        reason: 'FieldValueTypeInvalid',
      },
    ];
  }
  const errors: FieldError[] = [];
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    errors.push(fieldErrors.notSupported(path, value, schema.enum));
  if (typeof value === 'number') {
    const { minimum, maximum } = schema;
    if (minimum !== undefined && (schema.exclusiveMinimum ? value <= minimum : value < minimum))
      errors.push(
        fieldErrors.invalid(
          path,
          value,
          `${path} in body should be greater than ${schema.exclusiveMinimum ? '' : 'or equal to '}${minimum}`,
        ),
      );
    if (maximum !== undefined && (schema.exclusiveMaximum ? value >= maximum : value > maximum))
      errors.push(
        fieldErrors.invalid(
          path,
          value,
          `${path} in body should be less than ${schema.exclusiveMaximum ? '' : 'or equal to '}${maximum}`,
        ),
      );
  }
  if (typeof value === 'string') {
    if (schema.maxLength !== undefined && value.length > schema.maxLength)
      errors.push(fieldErrors.tooLong(path, schema.maxLength));
    if (schema.minLength !== undefined && value.length < schema.minLength)
      errors.push(
        fieldErrors.invalid(
          path,
          value,
          `${path} in body should be at least ${schema.minLength} chars long`,
        ),
      );
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value))
      errors.push(
        fieldErrors.invalid(path, value, `${path} in body should match '${schema.pattern}'`),
      );
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems)
      errors.push(fieldErrors.tooMany(path, value.length, schema.maxItems));
    if (schema.minItems !== undefined && value.length < schema.minItems)
      errors.push(
        fieldErrors.invalid(
          path,
          value.length,
          `${path} in body should have at least ${schema.minItems} items`,
        ),
      );
    const items = schema.items;
    if (items) value.forEach((v, i) => errors.push(...validateSchema(v, items, `${path}[${i}]`)));
  }
  if (isObject(value)) {
    for (const key of schema.required ?? [])
      if (!(key in value)) errors.push(fieldErrors.required(join(path, key)));
    const additional = isObject(schema.additionalProperties)
      ? (schema.additionalProperties as JsonSchema)
      : undefined;
    for (const [key, child] of Object.entries(value)) {
      if (path === '' && key === 'metadata') continue;
      const childSchema = schema.properties?.[key] ?? additional;
      if (childSchema) errors.push(...validateSchema(child, childSchema, join(path, key)));
    }
  }
  return errors;
}
