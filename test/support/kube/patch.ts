import { StatusError } from './errors.js';
import { clone, isObject, type Json, type JsonObject } from './types.js';

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const result: JsonObject = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

const invalidPatch = (message: string): StatusError => new StatusError(422, 'Invalid', message);

function unescapePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw invalidPatch(`invalid JSON pointer: "${pointer}"`);
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: Json, parts: string[], path: string): { parent: Json; key: string } {
  let parent: Json = doc;
  for (const part of parts.slice(0, -1)) {
    const next: Json | undefined = Array.isArray(parent)
      ? parent[Number(part)]
      : isObject(parent)
        ? parent[part]
        : undefined;
    if (next === undefined) throw invalidPatch(`doc is missing path: "${path}": missing value`);
    parent = next;
  }
  return { parent, key: parts.at(-1) ?? '' };
}

function getAt(doc: Json, path: string): Json {
  let current: Json | undefined = doc;
  for (const part of unescapePointer(path)) {
    current = Array.isArray(current)
      ? current[Number(part)]
      : isObject(current)
        ? current[part]
        : undefined;
    if (current === undefined) throw invalidPatch(`doc is missing path: "${path}": missing value`);
  }
  return current;
}

function removeAt(doc: Json, path: string): Json {
  const { parent, key } = parentOf(doc, unescapePointer(path), path);
  if (Array.isArray(parent)) {
    const i = Number(key);
    if (!Number.isInteger(i) || i < 0 || i >= parent.length)
      throw invalidPatch(`doc is missing path: "${path}": missing value`);
    return parent.splice(i, 1)[0] ?? null;
  }
  if (!isObject(parent) || !(key in parent))
    throw invalidPatch(`doc is missing path: "${path}": missing value`);
  const value = parent[key] ?? null;
  delete parent[key];
  return value;
}

function addAt(doc: Json, path: string, value: Json, replace: boolean): Json {
  const parts = unescapePointer(path);
  if (parts.length === 0) return clone(value);
  const { parent, key } = parentOf(doc, parts, path);
  if (Array.isArray(parent)) {
    if (key === '-' && !replace) parent.push(clone(value));
    else {
      const i = Number(key);
      const max = replace ? parent.length - 1 : parent.length;
      if (!Number.isInteger(i) || i < 0 || i > max)
        throw invalidPatch(`doc is missing path: "${path}": missing value`);
      parent.splice(i, replace ? 1 : 0, clone(value));
    }
  } else if (isObject(parent)) {
    if (replace && !(key in parent))
      throw invalidPatch(`doc is missing key: "${path}": missing value`);
    parent[key] = clone(value);
  } else throw invalidPatch(`doc is missing path: "${path}": missing value`);
  return doc;
}

/** RFC 6902 JSON patch. */
export function jsonPatch(target: Json, operations: Json): Json {
  if (!Array.isArray(operations))
    throw new StatusError(
      400,
      'BadRequest',
      'json: cannot unmarshal object into Go value of type jsonpatch.Patch',
    );
  let doc = clone(target);
  for (const op of operations) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string')
      throw invalidPatch('Unexpected kind: unknown');
    const path = op.path;
    switch (op.op) {
      case 'add':
        doc = addAt(doc, path, op.value ?? null, false);
        break;
      case 'replace':
        doc = addAt(doc, path, op.value ?? null, true);
        break;
      case 'remove':
        removeAt(doc, path);
        break;
      case 'move': {
        const value = removeAt(doc, typeof op.from === 'string' ? op.from : '');
        doc = addAt(doc, path, value, false);
        break;
      }
      case 'copy':
        doc = addAt(doc, path, getAt(doc, typeof op.from === 'string' ? op.from : ''), false);
        break;
      case 'test':
        if (JSON.stringify(getAt(doc, path)) !== JSON.stringify(op.value ?? null))
          throw invalidPatch(`testing value ${path} failed: test failed`);
        break;
      default:
        throw invalidPatch(`Unexpected kind: ${op.op}`);
    }
  }
  return doc;
}

/**
 * Merge keys of the built-in lists kubectl and controllers patch (patchStrategy=merge in the
 * Kubernetes API types). Lists not named here are atomic, as in the real types.
 */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  imagePullSecrets: 'name',
  ownerReferences: 'uid',
  conditions: 'type',
  hostAliases: 'ip',
  ports: 'containerPort',
};
/** Primitive lists with patchStrategy=merge. */
const MERGED_PRIMITIVE_LISTS = new Set(['finalizers']);

export const mergeKeyOf = (field: string): string | undefined => MERGE_KEYS[field];

/** A Service's `spec.ports` merge by `port`; every other `ports` list is a container's. */
const mergeKeyAt = (path: string[]): string | undefined =>
  path.join('.') === 'spec.ports' ? 'port' : MERGE_KEYS[path.at(-1) ?? ''];

function keyOf(item: Json, mergeKey: string): string | undefined {
  if (!isObject(item)) return undefined;
  const value = item[mergeKey];
  return value === undefined ? undefined : JSON.stringify(value);
}

function mergeList(path: string[], live: Json[], patch: Json[], directives: JsonObject): Json[] {
  const field = path.at(-1) ?? '';
  const mergeKey = mergeKeyAt(path);
  if (patch.some((item) => isObject(item) && item.$patch === 'replace'))
    return patch
      .filter((item) => !(isObject(item) && item.$patch === 'replace'))
      .map(stripDirectives);
  if (mergeKey === undefined) {
    if (!MERGED_PRIMITIVE_LISTS.has(field)) return patch.map(stripDirectives);
    const result = clone(live);
    for (const item of patch)
      if (!result.some((x) => JSON.stringify(x) === JSON.stringify(item))) result.push(item);
    return result;
  }
  let result = clone(live);
  for (const item of patch) {
    const key = keyOf(item, mergeKey);
    const index = key === undefined ? -1 : result.findIndex((x) => keyOf(x, mergeKey) === key);
    if (isObject(item) && item.$patch === 'delete') {
      if (index >= 0) result.splice(index, 1);
      continue;
    }
    if (index >= 0) result[index] = strategicMergePatch(result[index], item, path);
    else result.push(stripDirectives(item));
  }
  const order = directives[`$setElementOrder/${field}`];
  if (Array.isArray(order)) {
    const rank = new Map(order.map((o, i) => [keyOf(o, mergeKey), i]));
    result = result
      .map((item, i) => ({ item, i }))
      .sort((a, b) => {
        const ra = rank.get(keyOf(a.item, mergeKey));
        const rb = rank.get(keyOf(b.item, mergeKey));
        if (ra !== undefined && rb !== undefined) return ra - rb;
        return a.i - b.i;
      })
      .map((x) => x.item);
  }
  return result;
}

function stripDirectives(value: Json): Json {
  if (Array.isArray(value)) return value.map(stripDirectives);
  if (!isObject(value)) return value;
  const result: JsonObject = {};
  for (const [k, v] of Object.entries(value))
    if (!k.startsWith('$')) result[k] = stripDirectives(v);
  return result;
}

/**
 * Strategic merge patch as far as kubectl and controllers use it on built-in types: lists with a
 * merge key merge by key, `$patch: replace|delete`, `$setElementOrder/…`, `$retainKeys`,
 * `$deleteFromPrimitiveList/…`; everything else behaves as a JSON merge patch.
 */
export function strategicMergePatch(
  target: Json | undefined,
  patch: Json,
  path: string[] = [],
): Json {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') return stripDirectives(patch);
  if (patch.$patch === 'delete') return {};
  const result: JsonObject = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      const field = key.slice('$deleteFromPrimitiveList/'.length);
      const list = result[field];
      if (Array.isArray(list) && Array.isArray(value))
        result[field] = list.filter(
          (x) => !value.some((v) => JSON.stringify(v) === JSON.stringify(x)),
        );
      continue;
    }
    if (key.startsWith('$')) continue;
    if (value === null) {
      delete result[key];
      continue;
    }
    const live = result[key];
    if (Array.isArray(value))
      result[key] = mergeList([...path, key], Array.isArray(live) ? live : [], value, patch);
    else if (isObject(value) && value.$patch === 'delete') delete result[key];
    else result[key] = strategicMergePatch(live, value, [...path, key]);
  }
  const retain = patch.$retainKeys;
  if (Array.isArray(retain))
    for (const key of Object.keys(result)) if (!retain.includes(key)) delete result[key];
  // Lists named only in $setElementOrder still get reordered.
  for (const [key, order] of Object.entries(patch)) {
    const field = key.startsWith('$setElementOrder/')
      ? key.slice('$setElementOrder/'.length)
      : undefined;
    if (field === undefined || field in patch || !Array.isArray(order)) continue;
    if (mergeKeyAt([...path, field]) === undefined) continue;
    const live = result[field];
    if (Array.isArray(live)) result[field] = mergeList([...path, field], live, [], patch);
  }
  return result;
}
