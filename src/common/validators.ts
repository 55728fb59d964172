import { registerDecorator, type ValidationOptions } from 'class-validator';

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
