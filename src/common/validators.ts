import { Transform } from 'class-transformer';
import { registerDecorator, type ValidationOptions } from 'class-validator';

/** Largest PostgreSQL `integer` (int4): the bound of integer query parameters that reach SQL. */
export const MAX_INT4 = 2_147_483_647;

/** Highest page number of a paged list: (page - 1) * limit stays an exact integer and a valid SQL OFFSET. */
export const MAX_PAGE = MAX_INT4;
/** Most items a page of a list holds. */
export const MAX_PAGE_SIZE = 100;

const DECIMAL_DIGITS = /^[0-9]+$/;

/** A plain object whose values are all strings (build args, environment). */
export function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}

export function IsStringRecord(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isStringRecord',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: '$property must be an object of string values', ...options },
      validator: { validate: (value: unknown) => isStringRecord(value) },
    });
}

/** Validates with a predicate that returns a problem text, or undefined when the value is fine. */
export function Satisfies(
  problem: (value: unknown) => string | undefined,
  options?: ValidationOptions,
): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'satisfies',
      target: target.constructor,
      propertyName: propertyName as string,
      options: {
        message: (args) => `${args.property} ${problem(args.value) ?? 'is invalid'}`,
        ...options,
      },
      validator: { validate: (value: unknown) => problem(value) === undefined },
    });
}

/**
 * A query parameter holding an integer from `min` to `max`, written in decimal digits only.
 * Number() would also take "0x10", "1e3", "+1", " 12" and "1.0", and round "9007199254740993";
 * those, a repeated parameter and an empty one are refused with one message naming the range.
 */
export function QueryInteger(min: number, max: number): PropertyDecorator {
  const toNumber = Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && DECIMAL_DIGITS.test(value) ? Number(value) : value,
  );
  return (target, propertyName) => {
    toNumber(target, propertyName);
    registerDecorator({
      name: 'queryInteger',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: `$property must be a decimal integer from ${min} to ${max}` },
      validator: {
        validate: (value: unknown) =>
          typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max,
      },
    });
  };
}
