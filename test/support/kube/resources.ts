import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import {
  isObject,
  type JsonSchema,
  type KubeObject,
  type PrinterColumn,
  type ResourceType,
} from './types.js';

type BuiltIn = Pick<ResourceType, 'group' | 'version' | 'kind' | 'plural' | 'namespaced'> &
  Partial<ResourceType>;

function builtIn(spec: BuiltIn): ResourceType {
  return {
    listKind: `${spec.kind}List`,
    singular: spec.kind.toLowerCase(),
    shortNames: [],
    categories: [],
    statusSubresource: false,
    custom: false,
    allowCreateOnUpdate: false,
    allowUnconditionalUpdate: true,
    returnDeletedObject: false,
    defaultPropagation: 'Background',
    ...spec,
  };
}

/** The built-in resources the double serves (the ones kiln and its tests touch). */
export function builtInResources(): ResourceType[] {
  return [
    builtIn({
      group: '',
      version: 'v1',
      kind: 'Namespace',
      plural: 'namespaces',
      namespaced: false,
      shortNames: ['ns'],
      statusSubresource: true,
      returnDeletedObject: true,
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'Pod',
      plural: 'pods',
      namespaced: true,
      shortNames: ['po'],
      categories: ['all'],
      statusSubresource: true,
      returnDeletedObject: true,
    }),
    builtIn({ group: '', version: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      plural: 'configmaps',
      namespaced: true,
      shortNames: ['cm'],
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'Event',
      plural: 'events',
      namespaced: true,
      shortNames: ['ev'],
      allowCreateOnUpdate: true,
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'ServiceAccount',
      plural: 'serviceaccounts',
      namespaced: true,
      shortNames: ['sa'],
    }),
    builtIn({
      group: 'batch',
      version: 'v1',
      kind: 'Job',
      plural: 'jobs',
      namespaced: true,
      categories: ['all'],
      statusSubresource: true,
      defaultPropagation: 'Orphan',
    }),
    builtIn({
      group: 'coordination.k8s.io',
      version: 'v1',
      kind: 'Lease',
      plural: 'leases',
      namespaced: true,
      allowCreateOnUpdate: true,
    }),
    // What a Helm chart renders; names, scopes and subresources as `kubectl api-resources` on 1.32.
    builtIn({
      group: '',
      version: 'v1',
      kind: 'Service',
      plural: 'services',
      namespaced: true,
      shortNames: ['svc'],
      categories: ['all'],
      statusSubresource: true,
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'ResourceQuota',
      plural: 'resourcequotas',
      namespaced: true,
      shortNames: ['quota'],
      statusSubresource: true,
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'LimitRange',
      plural: 'limitranges',
      namespaced: true,
      shortNames: ['limits'],
    }),
    builtIn({
      group: '',
      version: 'v1',
      kind: 'PersistentVolumeClaim',
      plural: 'persistentvolumeclaims',
      namespaced: true,
      shortNames: ['pvc'],
      statusSubresource: true,
    }),
    builtIn({
      group: 'apps',
      version: 'v1',
      kind: 'Deployment',
      plural: 'deployments',
      namespaced: true,
      shortNames: ['deploy'],
      categories: ['all'],
      statusSubresource: true,
    }),
    builtIn({
      group: 'apps',
      version: 'v1',
      kind: 'StatefulSet',
      plural: 'statefulsets',
      namespaced: true,
      shortNames: ['sts'],
      categories: ['all'],
      statusSubresource: true,
    }),
    ...['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].map((kind) =>
      builtIn({
        group: 'rbac.authorization.k8s.io',
        version: 'v1',
        kind,
        plural: `${kind.toLowerCase()}s`,
        namespaced: !kind.startsWith('Cluster'),
      }),
    ),
    builtIn({
      group: 'networking.k8s.io',
      version: 'v1',
      kind: 'NetworkPolicy',
      plural: 'networkpolicies',
      namespaced: true,
      shortNames: ['netpol'],
    }),
    builtIn({
      group: 'networking.k8s.io',
      version: 'v1',
      kind: 'Ingress',
      plural: 'ingresses',
      namespaced: true,
      shortNames: ['ing'],
      statusSubresource: true,
    }),
    builtIn({
      group: 'policy',
      version: 'v1',
      kind: 'PodDisruptionBudget',
      plural: 'poddisruptionbudgets',
      namespaced: true,
      shortNames: ['pdb'],
      statusSubresource: true,
    }),
    builtIn({
      group: 'apiextensions.k8s.io',
      version: 'v1',
      kind: 'CustomResourceDefinition',
      plural: 'customresourcedefinitions',
      namespaced: false,
      shortNames: ['crd', 'crds'],
      categories: ['api-extensions'],
      statusSubresource: true,
      returnDeletedObject: true,
    }),
  ];
}

interface CrdVersion {
  name: string;
  served?: boolean;
  storage?: boolean;
  schema?: { openAPIV3Schema?: JsonSchema };
  subresources?: { status?: object };
  additionalPrinterColumns?: PrinterColumn[];
}

interface Crd {
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: {
      kind: string;
      listKind?: string;
      plural: string;
      singular?: string;
      shortNames?: string[];
      categories?: string[];
    };
    versions: CrdVersion[];
  };
}

const isCrd = (document: unknown): document is KubeObject =>
  isObject(document) &&
  document.apiVersion === 'apiextensions.k8s.io/v1' &&
  document.kind === 'CustomResourceDefinition';

/** The served versions of an apiextensions.k8s.io/v1 CustomResourceDefinition. */
export function resourcesOfCrd(document: unknown): ResourceType[] {
  if (!isCrd(document)) return [];
  const { group, names, scope, versions } = (document as unknown as Crd).spec;
  return versions
    .filter((v) => v.served !== false)
    .map((v) => ({
      group,
      version: v.name,
      kind: names.kind,
      listKind: names.listKind ?? `${names.kind}List`,
      plural: names.plural,
      singular: names.singular ?? names.kind.toLowerCase(),
      namespaced: scope === 'Namespaced',
      shortNames: names.shortNames ?? [],
      categories: names.categories ?? [],
      statusSubresource: v.subresources?.status !== undefined,
      custom: true,
      ...(v.schema?.openAPIV3Schema ? { schema: v.schema.openAPIV3Schema } : {}),
      ...(v.additionalPrinterColumns ? { printerColumns: v.additionalPrinterColumns } : {}),
      allowCreateOnUpdate: false,
      allowUnconditionalUpdate: false,
      returnDeletedObject: true,
      defaultPropagation: 'Background' as const,
    }));
}

/** The CRDs in the `*.yaml`/`*.yml` files of a directory (multi-document files allowed). */
export function crdsInDirectory(dir: string): KubeObject[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS() as unknown),
    )
    .filter(isCrd);
}
