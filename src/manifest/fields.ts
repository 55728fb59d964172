/*
 * Readers for untrusted JSON fields of a manifest. Each returns the normalised value, or undefined
 * when the field is absent or wrong, recording the problem in `details` under the field's path.
 */
import { type Details, MANIFEST_MESSAGES } from './types.js';

export type Json = Record<string, unknown>;

/** Deep enough for any real template fragment; stops cyclic or hostile input. */
const JSON_DEPTH_MAX = 64;
export const IMAGE_REFERENCE_MAX = 255;
export const WHITESPACE = /\s/;

/**
 * A list given as an array of strings or as one string, split on `separator` (also inside array
 * elements), trimmed, blanks dropped. Undefined when absent or of the wrong type.
 */
export function splitList(
  value: unknown,
  separator: RegExp,
  path: string,
  details: Details,
): string[] | undefined {
  if (isAbsent(value)) return undefined;
  let parts: string[];
  if (typeof value === 'string') {
    parts = [value];
  } else if (Array.isArray(value)) {
    parts = [];
    value.forEach((element: unknown, index) => {
      if (typeof element === 'string') parts.push(element);
      else details[`${path}.${index}`] = 'must be a string';
    });
  } else {
    details[path] = 'must be an array of strings or a string';
    return undefined;
  }
  return parts
    .flatMap((part) => part.split(separator))
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

export function enumValue<T extends string>(
  value: unknown,
  allowed: readonly T[],
  path: string,
  details: Details,
): T | undefined {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value))
    return value as T;
  details[path] = `must be one of: ${allowed.join(', ')}`;
  return undefined;
}

export function optionalString(value: unknown, path: string, details: Details): string | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value === 'string') return value;
  details[path] = 'must be a string';
  return undefined;
}

export function boundedString(
  value: unknown,
  path: string,
  max: number,
  details: Details,
): string | undefined {
  const text = optionalString(value, path, details);
  if (text !== undefined && text.length > max) {
    details[path] = `must be at most ${max} characters`;
    return undefined;
  }
  return text;
}

/** Trimmed; empty stays empty (the caller decides whether it is required). */
export function imageReference(value: unknown, path: string, details: Details): string | undefined {
  const text = optionalString(value, path, details)?.trim();
  if (text === undefined || text === '') return text;
  if (WHITESPACE.test(text) || text.length > IMAGE_REFERENCE_MAX) {
    details[path] =
      `must be an image reference without whitespace, at most ${IMAGE_REFERENCE_MAX} characters`;
    return undefined;
  }
  return text;
}

export function optionalBoolean(
  value: unknown,
  path: string,
  details: Details,
): boolean | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value === 'boolean') return value;
  details[path] = 'must be a boolean';
  return undefined;
}

export function stringArray(value: unknown, path: string, details: Details): string[] | undefined {
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) {
    details[path] = 'must be an array of strings';
    return undefined;
  }
  const strings: string[] = [];
  value.forEach((element: unknown, index) => {
    if (typeof element === 'string') strings.push(element.trim());
    else details[`${path}.${index}`] = 'must be a string';
  });
  return strings;
}

/** Keys become environment variable / build-arg names, so they must be usable as `KEY=value`. */
export function stringMap(
  value: unknown,
  path: string,
  details: Details,
  options: { dropEmpty?: boolean } = {},
): Record<string, string> | undefined {
  if (isAbsent(value)) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object of string to string';
    return undefined;
  }
  const entries: [string, string][] = [];
  for (const [key, entry] of Object.entries(value)) {
    if (key === '' || key.includes('=') || WHITESPACE.test(key)) {
      const problem = `key "${key}" must be non-empty, without "=" or whitespace`;
      details[path] = details[path] === undefined ? problem : `${details[path]}; ${problem}`;
    } else if (typeof entry !== 'string') {
      details[`${path}.${key}`] = 'must be a string';
    } else if (!(options.dropEmpty === true && entry === '')) {
      entries.push([key, entry]);
    }
  }
  // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
  return Object.fromEntries(entries);
}

export function jsonObject(value: unknown, path: string, details: Details): Json | undefined {
  if (isAbsent(value)) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object';
    return undefined;
  }
  return jsonCopy(value, path, details) as Json | undefined;
}

export function jsonArray(value: unknown, path: string, details: Details): unknown[] | undefined {
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) {
    details[path] = 'must be an array';
    return undefined;
  }
  return jsonCopy(value, path, details) as unknown[] | undefined;
}

function jsonCopy(value: unknown, path: string, details: Details): unknown {
  const copy = copyJson(value, 0);
  if (copy !== NOT_JSON) return copy;
  details[path] = 'must contain JSON values only';
  return undefined;
}

const NOT_JSON = Symbol('not JSON');

/** A deep copy made of plain data, or NOT_JSON for anything JSON cannot hold. */
function copyJson(value: unknown, depth: number): unknown {
  if (depth > JSON_DEPTH_MAX) return NOT_JSON;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : NOT_JSON;
  if (Array.isArray(value)) {
    const copy = value.map((element: unknown) => copyJson(element, depth + 1));
    return copy.includes(NOT_JSON) ? NOT_JSON : copy;
  }
  if (!isPlainObject(value)) return NOT_JSON;
  const entries = Object.entries(value).map(
    ([key, entry]) => [key, copyJson(entry, depth + 1)] as const,
  );
  // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
  return entries.some(([, entry]) => entry === NOT_JSON) ? NOT_JSON : Object.fromEntries(entries);
}

export function rejectUnknownKeys(
  value: Json,
  allowed: readonly string[],
  path: string,
  details: Details,
): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) details[`${path}.${key}`] = MANIFEST_MESSAGES.notAllowed;
  }
}

export function isPlainObject(value: unknown): value is Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  // Compared structurally, not with this realm's Object.prototype, so values from another
  // realm (vm contexts, worker messages) count as plain objects too.
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

/** An empty optional setting means "not set": leave it out rather than pass `--flag=`. */
export function nonEmpty(text: string | undefined): string | undefined {
  return text === '' ? undefined : text;
}

export function isAbsent(value: unknown): value is undefined | null {
  return value === undefined || value === null;
}

export function isEmptyValue(value: unknown): boolean {
  if (isAbsent(value)) return true;
  if (typeof value === 'string') return value.trim() === '';
  if (Array.isArray(value)) return value.length === 0;
  return isPlainObject(value) && Object.keys(value).length === 0;
}

/** Optional fields that were not given are left out, so the stored snapshot has no nulls. */
export function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
