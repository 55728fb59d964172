import { mergeKeyOf } from './patch.js';
import { clone, isObject, type Json, type JsonObject, type KubeObject } from './types.js';

/**
 * A simplified server-side apply: field sets are the leaf paths of an object (`f:spec/f:method`,
 * list items with a merge key as `k:{"name":"x"}`, other lists atomic), recorded per manager in
 * metadata.managedFields as FieldsV1.
 */
export type FieldSet = Set<string>;

/**
 * Joins the segments of a field path. Not '/': keys hold slashes (label names such as
 * `app.kubernetes.io/name`, merge keys such as `k:{"mountPath":"/workspace"}`), and a NUL can
 * appear in neither a key nor a JSON-encoded merge key.
 */
const SEP = '\u0000';

const IGNORED_TOP = new Set(['apiVersion', 'kind']);
const IGNORED_META = new Set([
  'name',
  'namespace',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'managedFields',
  'generateName',
  'selfLink',
]);

function walk(value: Json, path: string[], out: string[], field: string | undefined): void {
  if (isObject(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) walk(child, [...path, `f:${key}`], out, key);
    return;
  }
  const mergeKey = field === undefined ? undefined : mergeKeyOf(field);
  if (
    Array.isArray(value) &&
    mergeKey !== undefined &&
    value.every((v) => isObject(v) && mergeKey in v)
  ) {
    for (const item of value as JsonObject[]) {
      const itemPath = [...path, `k:${JSON.stringify({ [mergeKey]: item[mergeKey] ?? null })}`];
      const rest = { ...item };
      delete rest[mergeKey];
      if (Object.keys(rest).length === 0) out.push(itemPath.join(SEP));
      else walk(rest, itemPath, out, undefined);
    }
    return;
  }
  out.push(path.join(SEP));
}

/** The leaf paths of an object, without the fields the server owns. */
export function fieldSetOf(object: JsonObject, only?: 'status' | 'no-status'): FieldSet {
  const out: string[] = [];
  for (const [key, child] of Object.entries(object)) {
    if (IGNORED_TOP.has(key)) continue;
    if (only === 'status' && key !== 'status') continue;
    if (only === 'no-status' && key === 'status') continue;
    if (key === 'metadata' && isObject(child)) {
      for (const [mk, mv] of Object.entries(child))
        if (!IGNORED_META.has(mk)) walk(mv, ['f:metadata', `f:${mk}`], out, mk);
      continue;
    }
    walk(child, [`f:${key}`], out, key);
  }
  return new Set(out);
}

/** A field path as the API server prints it in a conflict: `.spec.method`, `.x[{"name":"a"}]`. */
export function fieldPathText(path: string): string {
  return path
    .split(SEP)
    .map((segment) => (segment.startsWith('f:') ? `.${segment.slice(2)}` : `[${segment.slice(2)}]`))
    .join('');
}

/** The value at a field path, or undefined when the object does not have it. */
export function valueAt(object: Json, path: string): Json | undefined {
  let current: Json | undefined = object;
  for (const segment of path.split(SEP)) {
    if (segment.startsWith('f:'))
      current = isObject(current) ? current[segment.slice(2)] : undefined;
    else {
      const key = JSON.parse(segment.slice(2)) as JsonObject;
      const [k, v] = Object.entries(key)[0] ?? ['', null];
      current = Array.isArray(current)
        ? current.find((item) => isObject(item) && JSON.stringify(item[k]) === JSON.stringify(v))
        : undefined;
    }
    if (current === undefined) return undefined;
  }
  return current;
}

/** Removes the field at `path` (a list item with a merge key is removed from its list). */
export function removeAt(object: JsonObject, path: string): void {
  const segments = path.split(SEP);
  let current: Json | undefined = object;
  for (const [i, segment] of segments.entries()) {
    const last = i === segments.length - 1;
    if (segment.startsWith('f:')) {
      if (!isObject(current)) return;
      if (last) delete current[segment.slice(2)];
      else current = current[segment.slice(2)];
    } else {
      if (!Array.isArray(current)) return;
      const [k, v] = Object.entries(JSON.parse(segment.slice(2)) as JsonObject)[0] ?? ['', null];
      const index = current.findIndex(
        (item) => isObject(item) && JSON.stringify(item[k]) === JSON.stringify(v),
      );
      if (index < 0) return;
      if (last) current.splice(index, 1);
      else current = current[index];
    }
  }
}

/** Applied configuration merged into the live object: maps recursively, keyed lists by key. */
export function applyMerge(live: Json | undefined, applied: Json, field?: string): Json {
  if (isObject(applied)) {
    const result: JsonObject = isObject(live) ? clone(live) : {};
    for (const [key, value] of Object.entries(applied))
      result[key] = applyMerge(result[key], value, key);
    return result;
  }
  const mergeKey = field === undefined ? undefined : mergeKeyOf(field);
  if (Array.isArray(applied) && Array.isArray(live) && mergeKey !== undefined) {
    const result = clone(live);
    for (const item of applied) {
      const index = isObject(item)
        ? result.findIndex(
            (x) => isObject(x) && JSON.stringify(x[mergeKey]) === JSON.stringify(item[mergeKey]),
          )
        : -1;
      if (index >= 0) result[index] = applyMerge(result[index], item);
      else result.push(clone(item));
    }
    return result;
  }
  return clone(applied);
}

/** FieldsV1 encoding of a field set: nested `{"f:spec":{"f:method":{}}}`. */
export function toFieldsV1(set: FieldSet): JsonObject {
  const root: JsonObject = {};
  for (const path of [...set].sort()) {
    let node = root;
    for (const segment of path.split(SEP)) {
      const next = node[segment];
      if (isObject(next)) node = next;
      else {
        const created: JsonObject = {};
        node[segment] = created;
        node = created;
      }
    }
  }
  return root;
}

export function fromFieldsV1(fields: Json | undefined, prefix: string[] = []): FieldSet {
  const out = new Set<string>();
  if (!isObject(fields)) return out;
  for (const [segment, child] of Object.entries(fields)) {
    if (segment === '.') continue;
    const path = [...prefix, segment];
    if (isObject(child) && Object.keys(child).length > 0)
      for (const p of fromFieldsV1(child, path)) out.add(p);
    else out.add(path.join(SEP));
  }
  return out;
}

export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: JsonObject;
  subresource?: string;
}

export function managedEntries(object: KubeObject): ManagedFieldsEntry[] {
  return (object.metadata.managedFields ?? []) as unknown as ManagedFieldsEntry[];
}

/** Leaf paths whose value differs between two objects (added, changed or removed). */
export function changedFields(
  before: JsonObject | undefined,
  after: JsonObject,
  only?: 'status' | 'no-status',
): FieldSet {
  const afterSet = fieldSetOf(after, only);
  const changed = new Set<string>();
  for (const path of afterSet)
    if (
      before === undefined ||
      JSON.stringify(valueAt(before, path)) !== JSON.stringify(valueAt(after, path))
    )
      changed.add(path);
  return changed;
}
