/** A Kubernetes object as JSON: the double stores and serves plain objects, never typed models. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: JsonObject[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** OpenAPI v3 schema as written in a CRD (JSONSchemaProps), the subset the double understands. */
export interface JsonSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  required?: string[];
  enum?: Json[];
  default?: Json;
  nullable?: boolean;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
}

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

/** One REST resource the double serves (a built-in or a CRD version). */
export interface ResourceType {
  group: string; // '' for core
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Has a `/status` subresource: the main endpoint ignores status, `/status` changes only status. */
  statusSubresource: boolean;
  /** A CRD: JSON/merge patch only, schema validation and pruning, printer columns. */
  custom: boolean;
  schema?: JsonSchema;
  printerColumns?: PrinterColumn[];
  /** PUT of a missing object creates it (leases, events). */
  allowCreateOnUpdate: boolean;
  /** PUT without metadata.resourceVersion is allowed (false for custom resources). */
  allowUnconditionalUpdate: boolean;
  /** DELETE answers the deleted object rather than a Status (pods, namespaces, custom resources). */
  returnDeletedObject: boolean;
  /** Default propagation when a DELETE names none (batch/v1 Jobs orphan their pods). */
  defaultPropagation: 'Background' | 'Orphan';
}

export const apiVersionOf = (type: ResourceType): string =>
  type.group === '' ? type.version : `${type.group}/${type.version}`;

/** `builds.kiln.dev`, `jobs.batch`, `pods`: how the real server names a resource in messages. */
export const qualifiedResource = (type: ResourceType): string =>
  type.group === '' ? type.plural : `${type.plural}.${type.group}`;

/** `Build.kiln.dev`, `Job.batch`, `Pod`: how the real server names a kind in Invalid messages. */
export const qualifiedKind = (type: ResourceType): string =>
  type.group === '' ? type.kind : `${type.kind}.${type.group}`;

export const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export const clone = <T>(value: T): T => structuredClone(value);
