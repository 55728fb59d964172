import { isDeepStrictEqual } from 'node:util';
import {
  CelScalar,
  celEnv,
  celFunc,
  celMap,
  celMethod,
  type CelInput,
  type CelMap,
  type CelResult,
  isCelError,
  mapType,
  parse,
  plan,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { fieldErrors, type FieldError } from './errors.js';
import { isObject, type Json, type JsonSchema } from './types.js';

/** One entry of a schema node's `x-kubernetes-validations`. */
export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?:
    'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

type RuleSchema = JsonSchema & {
  'x-kubernetes-validations'?: ValidationRule[];
  allOf?: RuleSchema[];
};

/** What the rules of one write produced: refusals, and the failures ratcheting let through. */
export interface RuleOutcome {
  errors: FieldError[];
  warnings: string[];
}

// optionalOldSelf rules see oldSelf as a CEL optional. The library has no optional type, so an
// optional is an empty map known to this module, and hasValue/value/orValue look it up here.
const optionals = new WeakMap<object, { value?: CelInput }>();
const optionalOf = (value?: CelInput): CelMap => {
  const optional = celMap(new Map());
  optionals.set(optional, value === undefined ? {} : { value });
  return optional;
};
const optionalIn = (target: CelMap): { value?: CelInput } => {
  const optional = optionals.get(target);
  if (!optional) throw new Error('no such overload');
  return optional;
};
const ANY_MAP = mapType(CelScalar.DYN, CelScalar.DYN);
const optionalFuncs = [
  celFunc('optional.of', [CelScalar.DYN], ANY_MAP, (value) => optionalOf(value)),
  celFunc('optional.none', [], ANY_MAP, () => optionalOf()),
  celMethod('hasValue', ANY_MAP, [], CelScalar.BOOL, function () {
    return 'value' in optionalIn(this);
  }),
  celMethod('value', ANY_MAP, [], CelScalar.DYN, function () {
    const optional = optionalIn(this);
    if (!('value' in optional)) throw new Error('optional.none() dereference');
    return optional.value ?? null;
  }),
  celMethod('orValue', ANY_MAP, [CelScalar.DYN], CelScalar.DYN, function (fallback) {
    const optional = optionalIn(this);
    return 'value' in optional ? (optional.value ?? null) : fallback;
  }),
];

// Standard CEL and the strings extension, both in the real server's environment. Rules calling
// the Kubernetes libraries (lists, regex find, url, quantity, ip...) fail to compile here.
const env = celEnv({ funcs: [...strings, ...optionalFuncs] });
type Program = ReturnType<typeof plan>;
type Expr = ReturnType<typeof parse>['expr'];

// Calls the planner handles itself rather than through a registered function.
const OPERATORS = new Set([
  '_&&_',
  '_||_',
  '_?_:_',
  '_[_]',
  '_[?_]',
  '_?._',
  '@not_strictly_false',
  '__not_strictly_false__',
]);
const TYPE_NAMES = new Set(
  'int uint double bool string bytes list map null_type type dyn'.split(' '),
);
// Functions of the Kubernetes CEL libraries the real server has and this environment does not,
// named in compile errors so that a rule using one is not mistaken for a wrong rule.
const KUBERNETES_LIBRARY = new Set([
  ...'isSorted sum min max find findAll url isURL quantity isQuantity'.split(' '),
  ...'ip isIP cidr isCIDR semver isSemver bind'.split(' '),
]);
const RESERVED = new Set([
  ...'true false null in as break const continue else for function'.split(' '),
  ...'if import let loop package namespace return var void while'.split(' '),
]);

/** A property name as CEL sees it (`foo-bar` is `foo__dash__bar`), or undefined if it cannot. */
function escapeProperty(name: string): string | undefined {
  if (name === '' || /^[0-9]/.test(name)) return undefined;
  if (RESERVED.has(name)) return `__${name}__`;
  if (!/^[A-Za-z0-9_./-]+$/.test(name)) return undefined;
  return name.replace(/__|[./-]/g, (s) =>
    s === '__' ? '__underscores__' : s === '.' ? '__dot__' : s === '-' ? '__dash__' : '__slash__',
  );
}

interface Compiled {
  rule: ValidationRule;
  program?: Program;
  /** Why the rule did not compile, worded as the real server's compiler. */
  error?: string;
  usesOldSelf: boolean;
  message?: Program;
  /** fieldPath normalized against the schema, or undefined when absent or not a valid path. */
  fieldPath?: string;
}

/** The compiled rules of one schema node and the nodes below it that have rules. */
interface RuleNode {
  schema: JsonSchema;
  rules: Compiled[];
  allOf: RuleNode[];
  properties: Map<string, RuleNode>;
  items?: RuleNode;
  additionalProperties?: RuleNode;
  /** The root of a resource (the custom resource, or an embedded one): self.metadata is typed. */
  resourceRoot: boolean;
}

const position = (source: string, offset: number): string => {
  const before = source.slice(0, offset).split('\n');
  return `<input>:${before.length}:${(before.at(-1)?.length ?? 0) + 1}`;
};

/**
 * What the parser does not catch and the real server's type checker does: a call of a function
 * this environment lacks, a name that is neither a variable nor in scope.
 */
function undeclared(expr: Expr, source: string, positions: Record<string, number>): string[] {
  const problems: string[] = [];
  const at = (e: Expr): string => position(source, positions[e.id.toString()] ?? 0);
  const qualified = (e: Expr): string | undefined => {
    if (e.exprKind.case === 'identExpr') return e.exprKind.value.name;
    if (
      e.exprKind.case === 'selectExpr' &&
      !e.exprKind.value.testOnly &&
      e.exprKind.value.operand
    ) {
      const operand = qualified(e.exprKind.value.operand);
      return operand === undefined ? undefined : `${operand}.${e.exprKind.value.field}`;
    }
    return undefined;
  };
  const walk = (e: Expr | undefined, scope: Set<string>): void => {
    if (!e) return;
    const kind = e.exprKind;
    switch (kind.case) {
      case 'identExpr':
        if (!scope.has(kind.value.name) && !TYPE_NAMES.has(kind.value.name))
          problems.push(`${at(e)}: undeclared reference to '${kind.value.name}' (in container '')`);
        return;
      case 'selectExpr':
        return walk(kind.value.operand, scope);
      case 'callExpr': {
        const call = kind.value;
        const target = call.target ? qualified(call.target) : undefined;
        if (target !== undefined && !scope.has(target.split('.')[0] ?? '')) {
          if (env.funcs.find(`${target}.${call.function}`)) {
            for (const arg of call.args) walk(arg, scope);
            return;
          }
        }
        if (!OPERATORS.has(call.function) && !env.funcs.find(call.function))
          problems.push(
            `${at(e)}: undeclared reference to '${call.function}' (in container '')` +
              (KUBERNETES_LIBRARY.has(call.function)
                ? ' (a Kubernetes CEL library function the API server double lacks)'
                : ''),
          );
        walk(call.target, scope);
        for (const arg of call.args) walk(arg, scope);
        return;
      }
      case 'listExpr':
        for (const element of kind.value.elements) walk(element, scope);
        return;
      case 'structExpr':
        for (const entry of kind.value.entries) {
          if (entry.keyKind.case === 'mapKey') walk(entry.keyKind.value, scope);
          walk(entry.value, scope);
        }
        return;
      case 'comprehensionExpr': {
        const c = kind.value;
        walk(c.iterRange, scope);
        walk(c.accuInit, scope);
        const inner = new Set([...scope, c.iterVar, c.iterVar2, c.accuVar].filter((v) => v !== ''));
        walk(c.loopCondition, inner);
        walk(c.loopStep, inner);
        walk(c.result, new Set([...scope, c.accuVar]));
        return;
      }
      case 'constExpr':
      case undefined:
        return;
    }
  };
  walk(expr, new Set(['self', 'oldSelf']));
  return problems;
}

/** Whether `oldSelf` is referred to (not merely a comprehension variable of that name). */
function refersToOldSelf(expr: Expr | undefined, shadowed = false): boolean {
  if (!expr) return false;
  const kind = expr.exprKind;
  switch (kind.case) {
    case 'identExpr':
      return !shadowed && kind.value.name === 'oldSelf';
    case 'selectExpr':
      return refersToOldSelf(kind.value.operand, shadowed);
    case 'callExpr':
      return [kind.value.target, ...kind.value.args].some((e) => refersToOldSelf(e, shadowed));
    case 'listExpr':
      return kind.value.elements.some((e) => refersToOldSelf(e, shadowed));
    case 'structExpr':
      return kind.value.entries.some(
        (entry) =>
          (entry.keyKind.case === 'mapKey' && refersToOldSelf(entry.keyKind.value, shadowed)) ||
          refersToOldSelf(entry.value, shadowed),
      );
    case 'comprehensionExpr': {
      const c = kind.value;
      const inner = shadowed || [c.iterVar, c.iterVar2, c.accuVar].includes('oldSelf');
      return (
        refersToOldSelf(c.iterRange, shadowed) ||
        refersToOldSelf(c.accuInit, shadowed) ||
        [c.loopCondition, c.loopStep].some((e) => refersToOldSelf(e, inner)) ||
        refersToOldSelf(c.result, shadowed || c.accuVar === 'oldSelf')
      );
    }
    case 'constExpr':
    case undefined:
      return false;
  }
}

/** Parses and plans one expression, or says why it does not compile as the real server would. */
function compileExpression(source: string): { program: Program; usesOldSelf: boolean } | string {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const located = /^(<input>:\d+:\d+): (.*)$/s.exec(message);
    return `ERROR: ${located ? `${located[1]}: Syntax error: ${located[2]}` : message}`;
  }
  const problems = undeclared(parsed.expr, source, parsed.sourceInfo?.positions ?? {});
  if (problems.length > 0) return problems.map((p) => `ERROR: ${p}`).join('\n');
  return { program: plan(env, parsed), usesOldSelf: refersToOldSelf(parsed.expr) };
}

/** A rule's fieldPath as a field path under the rule's node, if the schema declares it. */
function normalizeFieldPath(fieldPath: string, schema: JsonSchema): string | undefined {
  const tokens = fieldPath.match(/\.|\[|\]|'(?:[^'\\]|\\.)*'|[^.[\]']+/g) ?? [];
  const parts: string[] = [];
  let node: JsonSchema | undefined = schema;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    let name: string;
    if (token === '.' && tokens[i + 1] !== undefined && !'.[]'.includes(tokens[i + 1] ?? '')) {
      name = tokens[++i] ?? '';
    } else if (token === '[' && /^'.*'$/s.test(tokens[i + 1] ?? '') && tokens[i + 2] === ']') {
      name = (tokens[i + 1] ?? '').slice(1, -1).replace(/\\(.)/g, '$1');
      i += 2;
    } else return undefined;
    if (node?.properties) {
      node = node.properties[name];
      if (!node) return undefined;
      parts.push(parts.length === 0 ? name : `.${name}`);
    } else if (isObject(node?.additionalProperties)) {
      node = node.additionalProperties;
      parts.push(`[${name}]`);
    } else return undefined;
  }
  return parts.length > 0 ? parts.join('') : undefined;
}

function compileRule(rule: ValidationRule, schema: JsonSchema): Compiled {
  if (rule.rule.trim() === '') return { rule, usesOldSelf: false };
  const compiled = compileExpression(rule.rule);
  if (typeof compiled === 'string')
    return { rule, error: `compilation failed: ${compiled}`, usesOldSelf: false };
  const message =
    rule.messageExpression !== undefined && rule.messageExpression !== ''
      ? compileExpression(rule.messageExpression)
      : undefined;
  const fieldPath =
    rule.fieldPath !== undefined && rule.fieldPath !== ''
      ? normalizeFieldPath(rule.fieldPath, schema)
      : undefined;
  return {
    rule,
    program: compiled.program,
    usesOldSelf: compiled.usesOldSelf,
    ...(message !== undefined && typeof message !== 'string' ? { message: message.program } : {}),
    ...(fieldPath !== undefined ? { fieldPath } : {}),
  };
}

const hasRules = (schema: RuleSchema | undefined): boolean =>
  schema !== undefined &&
  ((schema['x-kubernetes-validations']?.length ?? 0) > 0 ||
    (schema.allOf ?? []).some(hasRules) ||
    hasRules(schema.items) ||
    (isObject(schema.additionalProperties) && hasRules(schema.additionalProperties)) ||
    Object.values(schema.properties ?? {}).some(hasRules));

/**
 * The validator of one node: `rules` holds the rules (the node itself, or one of its allOf
 * entries), `typed` the node as the structural schema declares it, which types `self`.
 */
function compileNode(
  rules: RuleSchema,
  typed: JsonSchema,
  resourceRoot: boolean,
): RuleNode | undefined {
  if (!hasRules(rules)) return undefined;
  const embedded = (s: JsonSchema): boolean => s['x-kubernetes-embedded-resource'] === true;
  const properties = new Map<string, RuleNode>();
  for (const [key, child] of Object.entries(rules.properties ?? {})) {
    const typedChild = typed.properties?.[key];
    const compiled = typedChild && compileNode(child, typedChild, embedded(typedChild));
    if (compiled) properties.set(key, compiled);
  }
  const items =
    rules.items && typed.items && compileNode(rules.items, typed.items, embedded(typed.items));
  const values = isObject(rules.additionalProperties)
    ? (rules.additionalProperties as RuleSchema)
    : undefined;
  const typedValues = isObject(typed.additionalProperties)
    ? (typed.additionalProperties as JsonSchema)
    : undefined;
  const additionalProperties =
    values && typedValues && compileNode(values, typedValues, embedded(typedValues));
  return {
    schema: typed,
    rules: (rules['x-kubernetes-validations'] ?? []).map((rule) => compileRule(rule, typed)),
    allOf: (rules.allOf ?? [])
      .map((entry) => compileNode(entry, typed, resourceRoot))
      .filter((n): n is RuleNode => n !== undefined),
    properties,
    ...(items ? { items } : {}),
    ...(additionalProperties ? { additionalProperties } : {}),
    resourceRoot,
  };
}

const compiledSchemas = new WeakMap<JsonSchema, RuleNode | null>();

/** The rules of a CRD version's schema, compiled once per schema object. */
function compiledRules(schema: JsonSchema): RuleNode | undefined {
  let node = compiledSchemas.get(schema);
  if (node === undefined) {
    node = compileNode(schema, schema, true) ?? null;
    compiledSchemas.set(schema, node);
  }
  return node ?? undefined;
}

// Typed values for the string formats that CEL sees as timestamps and durations.
const timestampOf = plan(env, parse('timestamp(v)'));
const durationOf = plan(env, parse('duration(v)'));
const converted = (result: CelResult, fallback: string): CelInput =>
  isCelError(result) ? fallback : result;

const RESOURCE_META: JsonSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, generateName: { type: 'string' } },
};

/** What a resource root's rules see: apiVersion, kind and metadata.name/generateName only. */
const withTypeAndObjectMeta = (schema: JsonSchema): JsonSchema => ({
  ...schema,
  properties: {
    ...schema.properties,
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: RESOURCE_META,
  },
});

/** A JSON value as the CEL value its schema makes it: int or double, timestamp, typed object. */
function celValueOf(value: Json, schema: JsonSchema | undefined): CelInput {
  if (value === null) return null;
  if (schema?.['x-kubernetes-embedded-resource']) schema = withTypeAndObjectMeta(schema);
  if (!schema?.type || schema['x-kubernetes-int-or-string']) return untyped(value);
  switch (schema.type) {
    case 'object': {
      if (!isObject(value)) return untyped(value);
      const entries = new Map<string, CelInput>();
      if (schema.properties) {
        for (const [key, child] of Object.entries(value)) {
          const property = schema.properties[key];
          const name = escapeProperty(key);
          if (property && name !== undefined) entries.set(name, celValueOf(child, property));
        }
      } else if (isObject(schema.additionalProperties)) {
        const values = schema.additionalProperties as JsonSchema;
        for (const [key, child] of Object.entries(value))
          entries.set(key, celValueOf(child, values));
      }
      return entries;
    }
    case 'array':
      return Array.isArray(value) ? value.map((v) => celValueOf(v, schema.items)) : untyped(value);
    case 'string':
      if (typeof value !== 'string') return untyped(value);
      switch (schema.format) {
        case 'date-time':
          return converted(timestampOf({ v: value }), value);
        case 'date':
          return converted(timestampOf({ v: `${value}T00:00:00Z` }), value);
        case 'duration':
          return converted(durationOf({ v: value }), value);
        case 'byte':
          return new Uint8Array(Buffer.from(value, 'base64'));
        default:
          return value;
      }
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : untyped(value);
    case 'number':
      return typeof value === 'number' ? value : untyped(value);
    case 'boolean':
      return untyped(value);
  }
}

/** Data no schema types (preserve-unknown-fields, int-or-string): whole numbers are ints. */
function untyped(value: Json): CelInput {
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(untyped);
  if (isObject(value)) return new Map(Object.entries(value).map(([k, v]) => [k, untyped(v)]));
  return value;
}

/**
 * How far a value corresponds to the old object, for ratcheting: a failing rule that does not
 * use oldSelf warns instead of refusing when its value (or, where no old value corresponds, the
 * nearest ancestor that has one) did not change.
 */
interface Correlation {
  current?: { value: Json; old: Json; schema: JsonSchema };
  parent?: { value: Json; old: Json; schema: JsonSchema };
}

const listKey = (item: Json, keys: string[]): string | undefined =>
  isObject(item) ? JSON.stringify(keys.map((k) => item[k] ?? null)) : undefined;

/** The old item with the same map keys as `item`, for lists of x-kubernetes-list-type map. */
function oldListItem(schema: JsonSchema, old: Json | undefined, item: Json): Json | undefined {
  const keys = schema['x-kubernetes-list-map-keys'];
  if (schema['x-kubernetes-list-type'] !== 'map' || !keys || !Array.isArray(old)) return undefined;
  const key = listKey(item, keys);
  return key === undefined ? undefined : old.find((o) => listKey(o, keys) === key);
}

/** Deep equality as ratcheting sees it: a map-list item is compared with the old one of its keys. */
function unchanged(c: { value: Json; old: Json; schema: JsonSchema } | undefined): boolean {
  if (!c) return false;
  const { value, old, schema } = c;
  const items = schema.items;
  if (
    Array.isArray(value) &&
    Array.isArray(old) &&
    items &&
    schema['x-kubernetes-list-type'] === 'map'
  )
    return (
      value.length === old.length &&
      value.every((v) => {
        const o = oldListItem(schema, old, v);
        return o !== undefined && unchanged({ value: v, old: o, schema: items });
      })
    );
  if (isObject(value) && isObject(old))
    return (
      Object.keys(value).length === Object.keys(old).length &&
      Object.entries(value).every(
        ([k, v]) =>
          old[k] !== undefined &&
          unchanged({ value: v, old: old[k] ?? null, schema: childSchema(schema, k) ?? {} }),
      )
    );
  return isDeepStrictEqual(value, old);
}

const childSchema = (schema: JsonSchema, key: string): JsonSchema | undefined =>
  schema.properties?.[key] ??
  (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);

const ratchets = (c: Correlation): boolean =>
  c.current ? unchanged(c.current) : unchanged(c.parent);

function correlateKey(c: Correlation, key: string, root: boolean): Correlation {
  if (!c.current) return c;
  // apiVersion and kind look the same in old and new, whatever was written: never ratcheted.
  if (root && (key === 'apiVersion' || key === 'kind')) return {};
  const { value, old, schema } = c.current;
  const child = childSchema(schema, key);
  const next =
    isObject(value) && isObject(old) && key in value && key in old && child
      ? { value: value[key] ?? null, old: old[key] ?? null, schema: child }
      : undefined;
  return { ...(next ? { current: next } : {}), parent: c.current };
}

function correlateIndex(c: Correlation, index: number): Correlation {
  if (!c.current) return c;
  const { value, old, schema } = c.current;
  const item = Array.isArray(value) ? value[index] : undefined;
  const oldItem = item === undefined ? undefined : oldListItem(schema, old, item);
  const next =
    item !== undefined && oldItem !== undefined && schema.items
      ? { value: item, old: oldItem, schema: schema.items }
      : undefined;
  return { ...(next ? { current: next } : {}), parent: c.current };
}

const child = (path: string | undefined, name: string): string =>
  path === undefined ? name : `${path}.${name}`;
const MAX_MESSAGE = 5 * 1024;

/** messageExpression's text, or undefined when the rule's message must stand in for it. */
function messageOf(program: Program, bindings: Record<string, CelInput>): string | undefined {
  const result = program(bindings);
  if (typeof result !== 'string') return undefined;
  const message = result.trim();
  if (message === '' || message.length > MAX_MESSAGE || message.includes('\n')) return undefined;
  return message;
}

const ruleText = (rule: ValidationRule): string =>
  rule.message?.trim() ? rule.message.trim() : rule.rule.trim();

/** cel-go's wording for the runtime errors a rule most often meets. */
function evaluationError(error: Error, rule: ValidationRule): string {
  const missing = /^field not found: (.*)$/.exec(error.message);
  if (missing) return `no such key: ${missing[1]} evaluating rule: ${ruleText(rule)}`;
  if (error.message.startsWith('found no matching overload'))
    return `'no such overload': call arguments did not match a supported operator, function or macro signature for rule: ${ruleText(rule)}`;
  return `${error.message} evaluating rule: ${ruleText(rule)}`;
}

function validateNode(
  node: RuleNode,
  value: Json | undefined,
  old: Json | undefined,
  path: string | undefined,
  correlation: Correlation,
  out: RuleOutcome,
): void {
  if (value === undefined || value === null) return;
  if (old === null) old = undefined;
  evaluateRules(node, value, old, path, correlation, out);
  // allOf errors are not ratcheted on their own value, only through an ancestor's.
  for (const entry of node.allOf)
    validateNode(
      entry,
      value,
      old,
      path,
      { ...(correlation.parent ? { parent: correlation.parent } : {}) },
      out,
    );
  if (Array.isArray(value)) {
    const items = node.items;
    if (items)
      value.forEach((item, i) =>
        validateNode(
          items,
          item,
          oldListItem(node.schema, old, item),
          `${path ?? ''}[${i}]`,
          correlateIndex(correlation, i),
          out,
        ),
      );
  } else if (isObject(value)) {
    const oldObject = isObject(old) ? old : undefined;
    const additional = node.additionalProperties;
    if (additional)
      for (const [key, v] of Object.entries(value))
        validateNode(
          additional,
          v,
          oldObject?.[key],
          `${path ?? ''}[${key}]`,
          correlateKey(correlation, key, node.resourceRoot),
          out,
        );
    for (const [key, v] of Object.entries(value)) {
      const property = node.properties.get(key);
      if (property)
        validateNode(
          property,
          v,
          oldObject?.[key],
          child(path, key),
          correlateKey(correlation, key, node.resourceRoot),
          out,
        );
    }
  }
}

function evaluateRules(
  node: RuleNode,
  value: Json,
  old: Json | undefined,
  path: string | undefined,
  correlation: Correlation,
  out: RuleOutcome,
): void {
  if (node.rules.length === 0) return;
  const schema = node.resourceRoot ? withTypeAndObjectMeta(node.schema) : node.schema;
  // Rules name the node's declared type, not its value, in "Invalid value: ...".
  const type = schema.type ?? '';
  const field = path ?? '<nil>';
  let self: CelInput | undefined;
  let oldSelf: CelInput | undefined;
  for (const compiled of node.rules) {
    const { rule } = compiled;
    if (compiled.error !== undefined) {
      out.errors.push(fieldErrors.invalid(field, type, `rule compile error: ${compiled.error}`));
      continue;
    }
    if (!compiled.program) continue;
    const optionalOldSelf = rule.optionalOldSelf === true;
    // A transition rule compares with the old value: without one there is nothing to compare.
    if (compiled.usesOldSelf && old === undefined && !optionalOldSelf) continue;
    self ??= celValueOf(value, schema);
    if (compiled.usesOldSelf && old !== undefined) oldSelf ??= celValueOf(old, schema);
    const bindings: Record<string, CelInput> = { self };
    if (optionalOldSelf)
      bindings.oldSelf = oldSelf === undefined ? optionalOf() : optionalOf(oldSelf);
    else if (oldSelf !== undefined) bindings.oldSelf = oldSelf;
    const result = compiled.program(bindings);
    if (isCelError(result)) {
      out.errors.push(fieldErrors.invalid(field, type, evaluationError(result, rule)));
      continue;
    }
    if (typeof result !== 'boolean') {
      out.errors.push(
        fieldErrors.invalid(
          field,
          type,
          'rule compile error: cel expression must evaluate to a bool',
        ),
      );
      continue;
    }
    if (result) continue;
    const at = compiled.fieldPath === undefined ? field : child(path, compiled.fieldPath);
    const detail =
      (compiled.message && messageOf(compiled.message, bindings)) ??
      (rule.message?.trim() ? rule.message.trim() : `failed rule: ${rule.rule.trim()}`);
    const error = errorForReason(rule.reason, at, type, detail);
    if (!compiled.usesOldSelf && ratchets(correlation))
      out.warnings.push(`${error.field}: ${error.detail}`);
    else out.errors.push(error);
  }
}

function errorForReason(
  reason: ValidationRule['reason'],
  field: string,
  type: string,
  detail: string,
): FieldError {
  switch (reason) {
    case 'FieldValueForbidden':
      return fieldErrors.forbidden(field, detail);
    case 'FieldValueRequired':
      return fieldErrors.required(field, detail);
    case 'FieldValueDuplicate':
      return fieldErrors.duplicate(field, type);
    case 'FieldValueInvalid':
    case undefined:
      return fieldErrors.invalid(field, type, detail);
  }
}

// Schema errors after which the object is too malformed for rules written against its schema.
const BLOCKING = new Set<FieldError['reason']>([
  'FieldValueNotSupported',
  'FieldValueRequired',
  'FieldValueTooLong',
  'FieldValueTooMany',
  'FieldValueTypeInvalid',
]);

/**
 * Evaluates the `x-kubernetes-validations` rules of a custom resource's schema, at every node,
 * as the real apiextensions server does after the schema checks (`earlier`): not at all when
 * those found the object malformed; transition rules only where an old value corresponds; a
 * failure of an unchanged value ratcheted into a warning on update.
 */
export function validateRules(
  schema: JsonSchema,
  object: Json,
  old: Json | undefined,
  earlier: FieldError[],
): RuleOutcome {
  const root = compiledRules(schema);
  const out: RuleOutcome = { errors: [], warnings: [] };
  if (!root) return out;
  if (earlier.some((e) => BLOCKING.has(e.reason))) {
    out.errors.push(
      fieldErrors.invalid(
        '<nil>',
        null,
        'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
      ),
    );
    return out;
  }
  const correlation: Correlation =
    old === undefined ? {} : { current: { value: object, old, schema } };
  validateNode(root, object, old, undefined, correlation, out);
  return out;
}

/** A rule as kube-apiserver prints it in a refusal (Go's %#v of apiextensions.ValidationRule). */
function renderedRule(rule: ValidationRule): string {
  const pointer = (type: string, set: boolean): string =>
    set ? `(*${type})(0xc000000000)` : `(*${type})(nil)`;
  return (
    `apiextensions.ValidationRule{Rule:${JSON.stringify(rule.rule)}, ` +
    `Message:${JSON.stringify(rule.message ?? '')}, ` +
    `MessageExpression:${JSON.stringify(rule.messageExpression ?? '')}, ` +
    `Reason:${pointer('apiextensions.FieldValueErrorReason', rule.reason !== undefined)}, ` +
    `FieldPath:${JSON.stringify(rule.fieldPath ?? '')}, ` +
    `OptionalOldSelf:${pointer('bool', rule.optionalOldSelf !== undefined)}}`
  );
}

/**
 * The refusals of a CRD whose rules do not compile, as the real server refuses the CRD itself
 * (rather than every later write of its objects): `path` is the schema's field path, such as
 * `spec.versions[0].schema.openAPIV3Schema`.
 */
export function ruleCompileErrors(schema: JsonSchema, path: string): FieldError[] {
  const errors: FieldError[] = [];
  const visit = (node: RuleSchema | undefined, at: string): void => {
    if (node === undefined) return;
    (node['x-kubernetes-validations'] ?? []).forEach((rule, i) => {
      const here = `${at}.x-kubernetes-validations[${i}]`;
      const compiled = compileExpression(rule.rule);
      if (typeof compiled === 'string')
        errors.push(
          fieldErrors.invalidRendered(
            `${here}.rule`,
            renderedRule(rule),
            `compilation failed: ${compiled}`,
          ),
        );
      if (rule.messageExpression !== undefined && rule.messageExpression !== '') {
        const message = compileExpression(rule.messageExpression);
        if (typeof message === 'string')
          errors.push(
            fieldErrors.invalidRendered(
              `${here}.messageExpression`,
              renderedRule(rule),
              `messageExpression compilation failed: ${message}`,
            ),
          );
      }
    });
    for (const [name, child] of Object.entries(node.properties ?? {}))
      visit(child, `${at}.properties[${name}]`);
    visit(node.items, `${at}.items`);
    if (isObject(node.additionalProperties))
      visit(node.additionalProperties, `${at}.additionalProperties`);
    (node.allOf ?? []).forEach((entry, i) => visit(entry, `${at}.allOf[${i}]`));
  };
  visit(schema, path);
  return errors;
}
