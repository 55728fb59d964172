import {
  isObject,
  type Json,
  type KubeObject,
  type PrinterColumn,
  type ResourceType,
} from './types.js';

/** Go's duration.HumanDuration, which the real server uses for AGE cells. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8)
    return hours % 24 === 0 ? `${hours / 24}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 365 * 8)
    return days % 365 === 0 ? `${days / 365}y` : `${Math.floor(days / 365)}y${days % 365}d`;
  return `${Math.floor(days / 365)}y`;
}

/**
 * The JSONPath subset printer columns use: `.a.b`, `[0]`, `[*]`, `[?(@.type=="Succeeded")]`.
 * Returns every match.
 */
export function jsonPath(root: Json, expression: string): Json[] {
  const tokens = expression.replace(/^\{|\}$/g, '').match(/\.[^.[]+|\[[^\]]*\]/g) ?? [];
  let current: Json[] = [root];
  for (const token of tokens) {
    const next: Json[] = [];
    for (const value of current) {
      if (token.startsWith('.')) {
        if (isObject(value) && token.slice(1) in value) next.push(value[token.slice(1)] ?? null);
        continue;
      }
      if (!Array.isArray(value)) continue;
      const inner = token.slice(1, -1);
      const filter = /^\?\(@\.([\w.]+)\s*==\s*["']([^"']*)["']\)$/.exec(inner);
      if (inner === '*') next.push(...value);
      else if (filter) {
        const [, field = '', expected] = filter;
        next.push(...value.filter((item) => jsonPath(item, `.${field}`)[0] === expected));
      } else {
        const item = value.at(Number(inner));
        if (item !== undefined) next.push(item);
      }
    }
    current = next;
  }
  return current;
}

interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

const NAME_COLUMN: ColumnDefinition = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};

const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created.',
};

/** A built-in's column: a JSONPath like a CRD's, or a cell the real server's printer computes. */
type Column = PrinterColumn & { compute?: (object: KubeObject, now: number) => Json };

const fieldsOf = (value: unknown): Record<string, unknown> => (isObject(value) ? value : {});
const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const textOf = (value: unknown): string => (typeof value === 'string' ? value : '');
const numberOf = (value: unknown): number => (typeof value === 'number' ? value : 0);
const specOf = (object: KubeObject): Record<string, unknown> => fieldsOf(object.spec);
const statusOf = (object: KubeObject): Record<string, unknown> => fieldsOf(object.status);

const computed = (
  name: string,
  compute: (object: KubeObject, now: number) => Json,
  type: PrinterColumn['type'] = 'string',
): Column => ({ name, type, jsonPath: '', compute });

/** CREATED AT, which the real server prints as an RFC 3339 time rather than an age. */
const CREATED_AT = computed('Created At', (o) => o.metadata.creationTimestamp ?? '', 'date');

/** The cells of `kubectl get jobs` (STATUS, COMPLETIONS, DURATION), as the real printer. */
function jobColumns(): Column[] {
  const has = (object: KubeObject, type: string): boolean =>
    listOf(statusOf(object).conditions).some(
      (c) => fieldsOf(c).type === type && fieldsOf(c).status === 'True',
    );
  return [
    computed('Status', (o) => {
      for (const type of ['Complete', 'Failed', 'FailureTarget', 'SuccessCriteriaMet'])
        if (has(o, type)) return type;
      return specOf(o).suspend === true ? 'Suspended' : 'Running';
    }),
    computed('Completions', (o) => {
      const completions = specOf(o).completions;
      return `${numberOf(statusOf(o).succeeded)}/${typeof completions === 'number' ? completions : 1}`;
    }),
    computed('Duration', (o, now) => {
      const status = statusOf(o);
      if (typeof status.startTime !== 'string') return '';
      const end =
        typeof status.completionTime === 'string' ? Date.parse(status.completionTime) : now;
      return humanDuration(end - Date.parse(status.startTime));
    }),
  ];
}

/** READY of Deployments and StatefulSets: ready replicas out of the desired ones. */
const READY = computed(
  'Ready',
  (o) => `${numberOf(statusOf(o).readyReplicas)}/${numberOf(specOf(o).replicas)}`,
);

/** metav1.FormatLabelSelector: requirements sorted by key, `<none>` when it selects everything. */
function formatSelector(selector: unknown): string {
  const terms: [string, string][] = Object.entries(fieldsOf(fieldsOf(selector).matchLabels)).map(
    ([k, v]) => [k, `${k}=${textOf(v)}`],
  );
  for (const e of listOf(fieldsOf(selector).matchExpressions)) {
    const { key, operator, values } = fieldsOf(e);
    const k = textOf(key);
    const set = `(${listOf(values).map(textOf).sort().join(',')})`;
    const term =
      operator === 'In'
        ? `${k} in ${set}`
        : operator === 'NotIn'
          ? `${k} notin ${set}`
          : operator === 'DoesNotExist'
            ? `!${k}`
            : k;
    terms.push([k, term]);
  }
  const text = terms
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, t]) => t)
    .join(',');
  return text === '' ? '<none>' : text;
}

const loadBalancerAddresses = (o: KubeObject): string[] =>
  listOf(fieldsOf(statusOf(o).loadBalancer).ingress).map(
    (i) => textOf(fieldsOf(i).ip) || textOf(fieldsOf(i).hostname),
  );

function serviceExternalIp(o: KubeObject): string {
  const spec = specOf(o);
  if (spec.type === 'ExternalName') return textOf(spec.externalName);
  const addresses = [...listOf(spec.externalIPs).map(textOf), ...loadBalancerAddresses(o)];
  if (addresses.length > 0) return addresses.join(',');
  return spec.type === 'LoadBalancer' ? '<pending>' : '<none>';
}

function servicePorts(o: KubeObject): string {
  const ports = listOf(specOf(o).ports).map((p) => {
    const { port, nodePort, protocol } = fieldsOf(p);
    return `${numberOf(port)}${typeof nodePort === 'number' ? `:${nodePort}` : ''}/${textOf(protocol)}`;
  });
  return ports.length > 0 ? ports.join(',') : '<none>';
}

/** An int-or-string field (a quantity, a count or a percentage) as printed, or `absent`. */
const intOrString = (value: unknown, absent: string): string =>
  typeof value === 'string' || typeof value === 'number' ? String(value) : absent;

/** REQUEST or LIMIT of a ResourceQuota: `used/hard` of each (or each `limits.`) resource. */
function quotaUsage(o: KubeObject, limits: boolean): string {
  const status = statusOf(o);
  return Object.keys(fieldsOf(specOf(o).hard))
    .sort()
    .filter((name) => (name.includes('.') && name.split('.')[0] === 'limits') === limits)
    .map((name) => {
      const quantity = (of: unknown): string => intOrString(fieldsOf(of)[name], '0');
      return `${name}: ${quantity(status.used)}/${quantity(status.hard)}`;
    })
    .join(', ');
}

const ACCESS_MODES: Record<string, string> = {
  ReadWriteOnce: 'RWO',
  ReadOnlyMany: 'ROX',
  ReadWriteMany: 'RWX',
  ReadWriteOncePod: 'RWOP',
};

function ingressHosts(o: KubeObject): string {
  const rules = listOf(specOf(o).rules);
  const hosts = rules.map((r) => textOf(fieldsOf(r).host)).filter((h) => h !== '');
  if (hosts.length === 0) return '*';
  const shown = hosts.slice(0, 3).join(',');
  return rules.length > 3 ? `${shown} + ${rules.length - 3} more...` : shown;
}

/** Columns of the built-ins (the real server's, without the `-o wide` ones). */
const BUILT_IN_COLUMNS: Record<string, Column[]> = {
  Pod: [
    { name: 'Status', type: 'string', jsonPath: '.status.phase' },
    { name: 'Restarts', type: 'integer', jsonPath: '.status.containerStatuses[0].restartCount' },
    AGE_COLUMN,
  ],
  Job: [...jobColumns(), AGE_COLUMN],
  Namespace: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }, AGE_COLUMN],
  Deployment: [
    READY,
    computed('Up-to-date', (o) => numberOf(statusOf(o).updatedReplicas), 'integer'),
    computed('Available', (o) => numberOf(statusOf(o).availableReplicas), 'integer'),
    AGE_COLUMN,
  ],
  StatefulSet: [READY, AGE_COLUMN],
  Service: [
    { name: 'Type', type: 'string', jsonPath: '.spec.type' },
    computed('Cluster-IP', (o) => textOf(specOf(o).clusterIP) || '<none>'),
    computed('External-IP', serviceExternalIp),
    computed('Port(s)', servicePorts),
    AGE_COLUMN,
  ],
  ResourceQuota: [
    AGE_COLUMN,
    computed('Request', (o) => quotaUsage(o, false)),
    computed('Limit', (o) => quotaUsage(o, true)),
  ],
  LimitRange: [CREATED_AT],
  PersistentVolumeClaim: [
    { name: 'Status', type: 'string', jsonPath: '.status.phase' },
    { name: 'Volume', type: 'string', jsonPath: '.spec.volumeName' },
    computed('Capacity', (o) =>
      specOf(o).volumeName ? textOf(fieldsOf(statusOf(o).capacity).storage) : '',
    ),
    computed('Access Modes', (o) =>
      specOf(o).volumeName
        ? listOf(statusOf(o).accessModes)
            .map((m) => ACCESS_MODES[textOf(m)] ?? textOf(m))
            .join(',')
        : '',
    ),
    computed('StorageClass', (o) => textOf(specOf(o).storageClassName) || '<unset>'),
    computed(
      'VolumeAttributesClass',
      (o) => textOf(specOf(o).volumeAttributesClassName) || '<unset>',
    ),
    AGE_COLUMN,
  ],
  Role: [CREATED_AT],
  ClusterRole: [CREATED_AT],
  RoleBinding: [
    computed(
      'Role',
      (o) => `${textOf(fieldsOf(o.roleRef).kind)}/${textOf(fieldsOf(o.roleRef).name)}`,
    ),
    AGE_COLUMN,
  ],
  ClusterRoleBinding: [
    computed(
      'Role',
      (o) => `${textOf(fieldsOf(o.roleRef).kind)}/${textOf(fieldsOf(o.roleRef).name)}`,
    ),
    AGE_COLUMN,
  ],
  NetworkPolicy: [
    computed('Pod-Selector', (o) => formatSelector(specOf(o).podSelector)),
    AGE_COLUMN,
  ],
  Ingress: [
    computed('Class', (o) => textOf(specOf(o).ingressClassName) || '<none>'),
    computed('Hosts', ingressHosts),
    computed('Address', (o) => loadBalancerAddresses(o).join(',')),
    computed('Ports', (o) => (listOf(specOf(o).tls).length > 0 ? '80, 443' : '80')),
    AGE_COLUMN,
  ],
  PodDisruptionBudget: [
    computed('Min Available', (o) => intOrString(specOf(o).minAvailable, 'N/A')),
    computed('Max Unavailable', (o) => intOrString(specOf(o).maxUnavailable, 'N/A')),
    computed('Allowed Disruptions', (o) => numberOf(statusOf(o).disruptionsAllowed), 'integer'),
    AGE_COLUMN,
  ],
  CustomResourceDefinition: [CREATED_AT],
};

function cell(column: Column, object: KubeObject, now: number): Json {
  if (column.compute) return column.compute(object, now);
  const value = jsonPath(object as unknown as Json, column.jsonPath)[0];
  if (value === undefined || value === null) return null;
  switch (column.type) {
    case 'date':
      return typeof value === 'string' ? humanDuration(now - Date.parse(value)) : null;
    case 'integer':
    case 'number':
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'string':
      return typeof value === 'string' ? value : JSON.stringify(value);
  }
}

/** A meta.k8s.io/v1 Table, as `kubectl get` asks for with `Accept: …;as=Table`. */
export function toTable(
  type: ResourceType,
  objects: KubeObject[],
  listMeta: Record<string, string>,
  includeObject: string,
): Json {
  const columns: Column[] = type.custom
    ? (type.printerColumns ?? [AGE_COLUMN])
    : (BUILT_IN_COLUMNS[type.kind] ?? [AGE_COLUMN]);
  const now = Date.now();
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMeta,
    columnDefinitions: [
      NAME_COLUMN,
      ...columns.map((c) => ({
        name: c.name,
        type: c.type,
        format: c.format ?? '',
        description: c.description ?? '',
        priority: c.priority ?? 0,
      })),
    ] as unknown as Json,
    rows: objects.map((object) => ({
      cells: [object.metadata.name ?? '', ...columns.map((c) => cell(c, object, now))],
      object:
        includeObject === 'Object'
          ? (object as unknown as Json)
          : includeObject === 'None'
            ? null
            : ({
                kind: 'PartialObjectMetadata',
                apiVersion: 'meta.k8s.io/v1',
                metadata: object.metadata,
              } as unknown as Json),
    })),
  };
}
