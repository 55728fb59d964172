import { badRequest } from './errors.js';
import type { KubeObject } from './types.js';

type Requirement =
  | { op: 'eq' | 'neq'; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] }
  | { op: 'exists' | 'absent'; key: string };

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Splits on commas that are not inside `( … )`. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else current += ch;
  }
  terms.push(current);
  return terms.map((t) => t.trim()).filter((t) => t !== '');
}

function checkKey(key: string, selector: string): string {
  if (!KEY.test(key))
    throw badRequest(
      `unable to parse requirement: invalid label key "${key}" in selector "${selector}"`,
    );
  return key;
}

function checkValue(value: string, selector: string): string {
  if (!VALUE.test(value) || value.length > 63)
    throw badRequest(
      `unable to parse requirement: invalid label value: "${value}" in selector "${selector}"`,
    );
  return value;
}

/** A label selector in the real syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`. */
export class LabelSelector {
  private constructor(private readonly requirements: Requirement[]) {}

  static parse(selector: string | undefined): LabelSelector {
    if (!selector) return new LabelSelector([]);
    const requirements = splitTerms(selector).map((term): Requirement => {
      const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
      if (set) {
        const values = (set[3] ?? '').split(',').map((v) => checkValue(v.trim(), selector));
        return { op: set[2] as 'in' | 'notin', key: checkKey(set[1] ?? '', selector), values };
      }
      const eq = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
      if (eq) {
        const op = eq[2] === '!=' ? 'neq' : 'eq';
        return {
          op,
          key: checkKey(eq[1] ?? '', selector),
          value: checkValue(eq[3] ?? '', selector),
        };
      }
      if (term.startsWith('!'))
        return { op: 'absent', key: checkKey(term.slice(1).trim(), selector) };
      return { op: 'exists', key: checkKey(term, selector) };
    });
    return new LabelSelector(requirements);
  }

  matches(labels: Record<string, string> | undefined): boolean {
    const l = labels ?? {};
    return this.requirements.every((r) => {
      const has = Object.prototype.hasOwnProperty.call(l, r.key);
      const value = l[r.key];
      switch (r.op) {
        case 'eq':
          return has && value === r.value;
        case 'neq':
          return !has || value !== r.value;
        case 'in':
          return has && r.values.includes(value ?? '');
        case 'notin':
          return !has || !r.values.includes(value ?? '');
        case 'exists':
          return has;
        case 'absent':
          return !has;
      }
    });
  }
}

type FieldRequirement = { path: string; equal: boolean; value: string; of?: FieldValue };

/** How to read a selectable field that is not a plain path into the object. */
export type FieldValue = (object: KubeObject) => string;

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const part = (value: unknown, key: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;

/**
 * The fields of a core/v1 Event a selector may name, as the real registry's ToSelectableFields
 * lists them (pkg/registry/core/event/strategy.go). `source` is `source.component`, or the
 * reporting controller when an events.k8s.io client left the source empty.
 */
export const EVENT_FIELDS: Readonly<Record<string, FieldValue | undefined>> = {
  'involvedObject.kind': undefined,
  'involvedObject.namespace': undefined,
  'involvedObject.name': undefined,
  'involvedObject.uid': undefined,
  'involvedObject.apiVersion': undefined,
  'involvedObject.resourceVersion': undefined,
  'involvedObject.fieldPath': undefined,
  reason: undefined,
  reportingComponent: undefined,
  source: (o) => text(part(o.source, 'component')) || text(o.reportingComponent),
  type: undefined,
};

/** Field selectors: metadata.name and metadata.namespace everywhere, plus a kind's own fields. */
export class FieldSelector {
  private constructor(private readonly requirements: FieldRequirement[]) {}

  /**
   * `extraFields`: the kind's selectable fields beyond the metadata ones, each read at its path,
   * or by its function when `derived` names one.
   */
  static parse(
    selector: string | undefined,
    extraFields: readonly string[] = [],
    derived: Readonly<Record<string, FieldValue | undefined>> = {},
  ): FieldSelector {
    if (!selector) return new FieldSelector([]);
    const supported = ['metadata.name', 'metadata.namespace', ...extraFields];
    const requirements = splitTerms(selector).map((term) => {
      const m = /^([^!=\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
      if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${term}'`);
      const path = m[1] ?? '';
      if (!supported.includes(path)) throw badRequest(`field label not supported: ${path}`);
      const of = derived[path];
      return { path, equal: m[2] !== '!=', value: m[3] ?? '', ...(of ? { of } : {}) };
    });
    return new FieldSelector(requirements);
  }

  matches(object: KubeObject): boolean {
    return this.requirements.every((r) => {
      if (r.of) return (r.of(object) === r.value) === r.equal;
      let current: unknown = object;
      for (const key of r.path.split('.')) current = part(current, key);
      const value =
        typeof current === 'string'
          ? current
          : current === undefined
            ? ''
            : JSON.stringify(current);
      return r.equal ? value === r.value : value !== r.value;
    });
  }
}
