/*
 * The Build custom resource (kiln.dev/v1alpha1) as TypeScript. Its spec and status types, enums,
 * defaults and API coordinates are generated from crds/builds.kiln.dev.yaml
 * (build-resource.generated.ts); this file adds the object around them and kiln's labels.
 */
import {
  type BUILD_API_VERSION,
  type BUILD_KIND,
  type BuildResourceSpec,
  type BuildResourceStatus,
} from './build-resource.generated.js';

export * from './build-resource.generated.js';

/**
 * The metadata kiln reads and writes, as JSON on the wire (timestamps are RFC 3339 strings).
 * A type alias rather than an interface, so a BuildResource fits generic custom-object clients
 * whose metadata carries an index signature.
 */
export type BuildResourceMetadata = {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: {
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
};

/** One Build as the API server stores it. */
export type BuildResource = {
  apiVersion: typeof BUILD_API_VERSION;
  kind: typeof BUILD_KIND;
  metadata: BuildResourceMetadata;
  spec: BuildResourceSpec;
  status?: BuildResourceStatus;
};

/**
 * Holds a Build until every log stream of its pod is stored. The API sets it with the start patch
 * of a Build it wrote (one write fewer for the operator); the operator adds it to a Build it
 * runs without it (applied with kubectl).
 */
export const LOGS_FINALIZER = 'kiln.dev/logs';

/** The labels kiln puts on a Build and on everything it creates for one (its Job, pod, ConfigMap, Secret). */
export const KILN_LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  buildId: 'kiln.dev/build-id',
  tenantId: 'kiln.dev/tenant-id',
  projectId: 'kiln.dev/project-id',
} as const;

/** The value of `app.kubernetes.io/managed-by` on everything kiln creates. */
export const MANAGED_BY_KILN = 'kiln';

/** The labels of one build's objects. */
export function buildLabels(build: {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
}): Record<string, string> {
  return {
    [KILN_LABELS.managedBy]: MANAGED_BY_KILN,
    [KILN_LABELS.buildId]: build.id,
    [KILN_LABELS.tenantId]: build.tenantId,
    [KILN_LABELS.projectId]: build.projectId,
  };
}
