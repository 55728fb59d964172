import { createHash } from 'node:crypto';
import { type Json, type JsonObject, type ResourceType } from './types.js';

/**
 * Just enough OpenAPI for kubectl 1.34: it reads /openapi/v3 to find each group-version's
 * document, looks there for a PATCH operation tagged with the kind's GVK and a `fieldValidation`
 * query parameter (server-side validation, else it validates client-side), and for the patch
 * content types the operation accepts. Strategic merge is not advertised even for built-ins (the
 * server accepts it): kubectl would then compute the patch from these partial schemas and warn;
 * without it kubectl falls back to its compiled-in types, which is what kubectl does for them anyway.
 */
const gvPath = (type: ResourceType): string =>
  type.group === '' ? `api/${type.version}` : `apis/${type.group}/${type.version}`;

const reverseDomain = (group: string): string =>
  group === '' ? 'io.k8s.api.core' : group.split('.').reverse().join('.');
const definitionName = (type: ResourceType): string =>
  `${reverseDomain(type.group)}.${type.version}.${type.kind}`;

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

function gvk(type: ResourceType): JsonObject {
  return { group: type.group, version: type.version, kind: type.kind };
}

function kindSchema(type: ResourceType, ref: (name: string) => string): JsonObject {
  const base: JsonObject = type.schema
    ? (JSON.parse(JSON.stringify(type.schema)) as JsonObject)
    : { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const properties = (base.properties ?? {}) as JsonObject;
  properties.metadata = { allOf: [{ $ref: ref(OBJECT_META) }], default: {} };
  properties.apiVersion = { type: 'string' };
  properties.kind = { type: 'string' };
  base.properties = properties;
  base['x-kubernetes-group-version-kind'] = [gvk(type)];
  return base;
}

function parameters(names: string[]): Json[] {
  return names.map((name) => ({
    name,
    in: 'query',
    schema: { type: 'string', uniqueItems: true },
  }));
}

function operations(type: ResourceType, ref: string): JsonObject {
  const body = (types: string[]): JsonObject => ({
    content: Object.fromEntries(
      types.map((t): [string, Json] => [
        t,
        { schema: t.includes('patch') ? { type: 'object' } : { $ref: ref } },
      ]),
    ),
    required: true,
  });
  const response = {
    '200': { description: 'OK', content: { 'application/json': { schema: { $ref: ref } } } },
  };
  const ext = { 'x-kubernetes-group-version-kind': gvk(type), 'x-kubernetes-action': '' };
  const patchTypes = [
    'application/json-patch+json',
    'application/merge-patch+json',
    'application/apply-patch+yaml',
  ];
  return {
    get: {
      operationId: `read${type.kind}`,
      responses: response,
      ...ext,
      'x-kubernetes-action': 'get',
    },
    put: {
      operationId: `replace${type.kind}`,
      requestBody: body(['*/*']),
      parameters: parameters(['dryRun', 'fieldManager', 'fieldValidation']),
      responses: response,
      ...ext,
      'x-kubernetes-action': 'put',
    },
    patch: {
      operationId: `patch${type.kind}`,
      requestBody: body(patchTypes),
      parameters: parameters(['dryRun', 'fieldManager', 'fieldValidation', 'force']),
      responses: response,
      ...ext,
      'x-kubernetes-action': 'patch',
    },
    delete: {
      operationId: `delete${type.kind}`,
      responses: response,
      ...ext,
      'x-kubernetes-action': 'delete',
    },
  };
}

function collectionOperations(type: ResourceType, ref: string): JsonObject {
  const ext = { 'x-kubernetes-group-version-kind': gvk(type) };
  return {
    get: {
      operationId: `list${type.kind}`,
      responses: { '200': { description: 'OK' } },
      ...ext,
      'x-kubernetes-action': 'list',
    },
    post: {
      operationId: `create${type.kind}`,
      requestBody: { content: { '*/*': { schema: { $ref: ref } } }, required: true },
      parameters: parameters(['dryRun', 'fieldManager', 'fieldValidation']),
      responses: { '201': { description: 'Created' } },
      ...ext,
      'x-kubernetes-action': 'post',
    },
  };
}

/**
 * /openapi/v3: one entry per served group-version, its URL carrying a hash of its document as
 * the real server's does, so a client that caches documents by URL sees a CRD's change.
 */
export function openApiV3Index(types: ResourceType[]): Json {
  const paths: JsonObject = {};
  for (const path of new Set(types.map(gvPath))) {
    const document = JSON.stringify(openApiV3Document(types, path));
    const hash = createHash('sha512').update(document).digest('hex').toUpperCase();
    paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${hash}` };
  }
  return { paths };
}

const OBJECT_META_SCHEMA: JsonObject = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    generateName: { type: 'string' },
    namespace: { type: 'string' },
    uid: { type: 'string' },
    resourceVersion: { type: 'string' },
    generation: { type: 'integer', format: 'int64' },
    creationTimestamp: { type: 'string', format: 'date-time' },
    deletionTimestamp: { type: 'string', format: 'date-time' },
    deletionGracePeriodSeconds: { type: 'integer', format: 'int64' },
    labels: { type: 'object', additionalProperties: { type: 'string', default: '' } },
    annotations: { type: 'object', additionalProperties: { type: 'string', default: '' } },
    finalizers: {
      type: 'array',
      items: { type: 'string', default: '' },
      'x-kubernetes-list-type': 'set',
      'x-kubernetes-patch-strategy': 'merge',
    },
    ownerReferences: {
      type: 'array',
      items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      'x-kubernetes-list-map-keys': ['uid'],
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-patch-merge-key': 'uid',
      'x-kubernetes-patch-strategy': 'merge',
    },
    managedFields: {
      type: 'array',
      items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    },
  },
};

/** /openapi/v3/apis/<group>/<version> (or api/v1): paths and schemas of one group-version. */
export function openApiV3Document(types: ResourceType[], gv: string): Json | undefined {
  const inGv = types.filter((t) => gvPath(t) === gv);
  if (inGv.length === 0) return undefined;
  const ref = (name: string): string => `#/components/schemas/${name}`;
  const schemas: JsonObject = { [OBJECT_META]: OBJECT_META_SCHEMA };
  const paths: JsonObject = {};
  for (const type of inGv) {
    const name = definitionName(type);
    schemas[name] = kindSchema(type, ref);
    const prefix = `/${gv}${type.namespaced ? '/namespaces/{namespace}' : ''}/${type.plural}`;
    paths[prefix] = collectionOperations(type, ref(name));
    paths[`${prefix}/{name}`] = operations(type, ref(name));
    if (type.statusSubresource) paths[`${prefix}/{name}/status`] = operations(type, ref(name));
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.34.0' },
    paths,
    components: { schemas },
  };
}

/** /openapi/v2: the same kinds as Swagger definitions (older clients, client-side validation). */
export function openApiV2(types: ResourceType[]): Json {
  const ref = (name: string): string => `#/definitions/${name}`;
  const definitions: JsonObject = { [OBJECT_META]: OBJECT_META_SCHEMA };
  // Built-ins are left out on purpose: kubectl then computes strategic merge patches from its
  // compiled-in Go types, which know every patch merge key, rather than from a partial schema.
  for (const type of types.filter((t) => t.custom))
    definitions[definitionName(type)] = kindSchema(type, ref);
  return {
    swagger: '2.0',
    info: { title: 'Kubernetes', version: 'v1.34.0' },
    paths: {},
    definitions,
  };
}
