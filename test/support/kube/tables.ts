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

/** Columns of the built-ins kubectl users look at most (the real server's, trimmed). */
const BUILT_IN_COLUMNS: Record<string, PrinterColumn[]> = {
  Pod: [
    { name: 'Status', type: 'string', jsonPath: '.status.phase' },
    { name: 'Restarts', type: 'integer', jsonPath: '.status.containerStatuses[0].restartCount' },
    AGE_COLUMN,
  ],
  Job: [
    { name: 'Status', type: 'string', jsonPath: '' },
    { name: 'Completions', type: 'string', jsonPath: '' },
    { name: 'Duration', type: 'string', jsonPath: '' },
    AGE_COLUMN,
  ],
  Namespace: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }, AGE_COLUMN],
};

/** The computed cells of `kubectl get jobs` (STATUS, COMPLETIONS, DURATION), as the real printer. */
function jobCell(column: string, object: KubeObject, now: number): Json {
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  const status = (object.status ?? {}) as Record<string, unknown>;
  const conditions = (Array.isArray(status.conditions) ? status.conditions : []) as {
    type?: string;
    status?: string;
  }[];
  const has = (type: string): boolean =>
    conditions.some((c) => c.type === type && c.status === 'True');
  switch (column) {
    case 'Status':
      if (has('Complete')) return 'Complete';
      if (has('Failed')) return 'Failed';
      if (has('FailureTarget')) return 'FailureTarget';
      if (has('SuccessCriteriaMet')) return 'SuccessCriteriaMet';
      if (spec.suspend === true) return 'Suspended';
      return 'Running';
    case 'Completions':
      return `${Number(status.succeeded ?? 0)}/${typeof spec.completions === 'number' ? spec.completions : 1}`;
    default: {
      const start = typeof status.startTime === 'string' ? Date.parse(status.startTime) : undefined;
      if (start === undefined) return '';
      const end =
        typeof status.completionTime === 'string' ? Date.parse(status.completionTime) : now;
      return humanDuration(end - start);
    }
  }
}

function cell(column: PrinterColumn, object: KubeObject, now: number): Json {
  if (column.jsonPath === '') return jobCell(column.name, object, now);
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
  const columns = type.custom
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
