import { KubeApiServer } from '../support/kube/api-server.js';
import { validateRules, type ValidationRule } from '../support/kube/cel.js';
import { fieldErrors, type FieldError } from '../support/kube/errors.js';
import type { Json, JsonSchema } from '../support/kube/types.js';

/** A schema node with rules (the double's JsonSchema does not declare the extension). */
const withRules = (schema: JsonSchema, ...rules: ValidationRule[]): JsonSchema =>
  ({ ...schema, 'x-kubernetes-validations': rules }) as JsonSchema;

/** A custom resource schema whose spec is `spec`. */
const resource = (spec: JsonSchema): JsonSchema => ({
  type: 'object',
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec,
  },
});

const object = (spec: Json, name = 'x'): Json => ({
  apiVersion: 'example.dev/v1',
  kind: 'Thing',
  metadata: { name, uid: 'u-1' },
  spec,
});

/** `field: detail`, as the Status message lists each error. */
const rendered = (errors: FieldError[]): string[] => errors.map((e) => `${e.field}: ${e.detail}`);

describe('validateRules', () => {
  describe('a rule on an object node', () => {
    const schema = resource(
      withRules(
        {
          type: 'object',
          properties: { min: { type: 'integer' }, max: { type: 'integer' } },
        },
        { rule: 'self.min <= self.max', message: 'min must not exceed max' },
      ),
    );

    it('refuses with the node path, the type "object" and the message', () => {
      const outcome = validateRules(schema, object({ min: 3, max: 1 }), undefined, []);

      expect(outcome.errors).toEqual([
        {
          field: 'spec',
          reason: 'FieldValueInvalid',
          detail: 'Invalid value: "object": min must not exceed max',
        },
      ]);
    });

    it('accepts a value that keeps it', () => {
      expect(validateRules(schema, object({ min: 1, max: 3 }), undefined, [])).toEqual({
        errors: [],
        warnings: [],
      });
    });

    it('reports a missing field as the real evaluator does, naming the rule by its message', () => {
      const outcome = validateRules(schema, object({ min: 1 }), undefined, []);

      expect(rendered(outcome.errors)).toEqual([
        'spec: Invalid value: "object": no such key: max evaluating rule: min must not exceed max',
      ]);
    });
  });

  it('names a scalar node by its type, and a rule without message by its expression', () => {
    const schema = resource({
      type: 'object',
      properties: {
        name: withRules({ type: 'string' }, { rule: "self.startsWith('kiln-')" }),
        replicas: withRules({ type: 'integer' }, { rule: 'self % 2 == 1' }),
        ratio: withRules({ type: 'number' }, { rule: 'self < 1.0', message: 'below one' }),
      },
    });

    const outcome = validateRules(
      schema,
      object({ name: 'web', replicas: 2, ratio: 1.5 }),
      undefined,
      [],
    );

    expect(rendered(outcome.errors)).toEqual([
      `spec.name: Invalid value: "string": failed rule: self.startsWith('kiln-')`,
      'spec.replicas: Invalid value: "integer": failed rule: self % 2 == 1',
      'spec.ratio: Invalid value: "number": below one',
    ]);
  });

  it('gives integers as CEL ints, numbers as doubles and date-times as timestamps', () => {
    const schema = resource(
      withRules(
        {
          type: 'object',
          properties: {
            count: { type: 'integer' },
            share: { type: 'number' },
            at: { type: 'string', format: 'date-time' },
          },
        },
        { rule: 'self.count + 1 == 3 && self.share + 0.5 == 1.0' },
        { rule: "self.at < timestamp('2030-01-01T00:00:00Z')" },
      ),
    );

    expect(
      validateRules(
        schema,
        object({ count: 2, share: 0.5, at: '2025-06-01T10:00:00Z' }),
        undefined,
        [],
      ).errors,
    ).toEqual([]);
    expect(
      rendered(
        validateRules(
          schema,
          object({ count: 2, share: 0.5, at: '2031-01-01T00:00:00Z' }),
          undefined,
          [],
        ).errors,
      ),
    ).toEqual([
      `spec: Invalid value: "object": failed rule: self.at < timestamp('2030-01-01T00:00:00Z')`,
    ]);
  });

  it.each([
    "self.tags.all(t, size(t) > 0) && self.tags.exists(t, t == 'b') && self.tags.exists_one(t, t == 'a')",
    "self.tags.map(t, t.upperAscii()).filter(t, t == 'A').size() == 1 && 'a' in self.tags",
    "self.name.matches('^[a-z-]+$') && self.name.startsWith('ki') && self.name.endsWith('ln') && self.name.contains('l')",
    "self.name.split('-').size() == 1 && self.name.indexOf('l') == 2 && self.name.substring(0, 2) == 'ki'",
    "self.name.replace('k', 'K') == 'Kiln' && self.name.lowerAscii() == self.name && self.name.trim() == self.name",
    "self.tags.join(',') == 'a,b' && has(self.name) && !has(self.missing) && size(self.labels) == 1",
    "self.labels.all(k, k.startsWith('app')) && self.labels['app'] == 'web' && int(self.count) == 2",
  ])('evaluates the macros and string functions of the real server: %s', (rule) => {
    const schema = resource(
      withRules(
        {
          type: 'object',
          properties: {
            name: { type: 'string' },
            missing: { type: 'string' },
            count: { type: 'integer' },
            tags: { type: 'array', items: { type: 'string' } },
            labels: { type: 'object', additionalProperties: { type: 'string' } },
          },
        },
        { rule },
      ),
    );
    const spec = { name: 'kiln', count: 2, tags: ['a', 'b'], labels: { app: 'web' } };

    expect(validateRules(schema, object(spec), undefined, []).errors).toEqual([]);
  });

  it('reaches a property whose name is no CEL identifier by its escaped name', () => {
    const schema = resource(
      withRules(
        {
          type: 'object',
          properties: { 'max-size': { type: 'integer' }, namespace: { type: 'string' } },
        },
        { rule: "self.max__dash__size > 0 && self.__namespace__ != ''" },
      ),
    );

    expect(
      validateRules(schema, object({ 'max-size': 0, namespace: 'a' }), undefined, []).errors,
    ).toHaveLength(1);
    expect(
      validateRules(schema, object({ 'max-size': 1, namespace: 'a' }), undefined, []).errors,
    ).toEqual([]);
  });

  it('runs a rule on the resource root with "<nil>" as the field, seeing metadata.name', () => {
    const schema = withRules(resource({ type: 'object' }), {
      rule: "self.metadata.name.startsWith('kiln-')",
      message: 'the name starts with kiln-',
    });

    expect(rendered(validateRules(schema, object({}, 'web'), undefined, []).errors)).toEqual([
      '<nil>: Invalid value: "object": the name starts with kiln-',
    ]);
    expect(validateRules(schema, object({}, 'kiln-web'), undefined, []).errors).toEqual([]);
  });

  describe('transition rules', () => {
    const schema = resource({
      type: 'object',
      properties: {
        owner: withRules(
          { type: 'string' },
          { rule: 'self == oldSelf', message: 'owner is immutable' },
        ),
        size: withRules(
          { type: 'integer' },
          {
            rule: '!oldSelf.hasValue() || self >= oldSelf.value()',
            message: 'size cannot shrink',
            optionalOldSelf: true,
          },
          {
            rule: 'oldSelf.orValue(0) <= self',
            message: 'size cannot shrink (orValue)',
            optionalOldSelf: true,
          },
        ),
      },
    });

    it('do not run on create', () => {
      expect(validateRules(schema, object({ owner: 'a' }), undefined, []).errors).toEqual([]);
    });

    it('refuse a change on update, with the message', () => {
      const outcome = validateRules(schema, object({ owner: 'b' }), object({ owner: 'a' }), []);

      expect(rendered(outcome.errors)).toEqual([
        'spec.owner: Invalid value: "string": owner is immutable',
      ]);
    });

    it('do not run where the old object has no value at their path', () => {
      expect(validateRules(schema, object({ owner: 'b' }), object({}), []).errors).toEqual([]);
    });

    it('run on create too with optionalOldSelf, oldSelf being an empty optional', () => {
      expect(validateRules(schema, object({ size: 1 }), undefined, []).errors).toEqual([]);
      expect(
        rendered(validateRules(schema, object({ size: 1 }), object({ size: 2 }), []).errors),
      ).toEqual([
        'spec.size: Invalid value: "integer": size cannot shrink',
        'spec.size: Invalid value: "integer": size cannot shrink (orValue)',
      ]);
    });
  });

  describe('messageExpression', () => {
    const schema = (messageExpression: string): JsonSchema =>
      resource({
        type: 'object',
        properties: {
          replicas: withRules(
            { type: 'integer' },
            { rule: 'self <= 5', message: 'at most 5 replicas', messageExpression },
          ),
        },
      });

    it('words the refusal from the value', () => {
      const outcome = validateRules(
        schema("'replicas is ' + string(self) + ', at most 5'"),
        object({ replicas: 7 }),
        undefined,
        [],
      );

      expect(rendered(outcome.errors)).toEqual([
        'spec.replicas: Invalid value: "integer": replicas is 7, at most 5',
      ]);
    });

    it.each([
      ['fails', "'replicas is ' + self"],
      ['is empty', "' '"],
      ['is no string', 'self'],
      ['spans lines', "'two\\nlines'"],
    ])('falls back to the message when it %s', (_case, expression) => {
      const outcome = validateRules(schema(expression), object({ replicas: 7 }), undefined, []);

      expect(rendered(outcome.errors)).toEqual([
        'spec.replicas: Invalid value: "integer": at most 5 replicas',
      ]);
    });
  });

  describe('fieldPath and reason', () => {
    const schema = (rule: Partial<ValidationRule>): JsonSchema =>
      resource(
        withRules(
          {
            type: 'object',
            properties: {
              limits: { type: 'object', properties: { cpu: { type: 'integer' } } },
              labels: { type: 'object', additionalProperties: { type: 'string' } },
            },
          },
          {
            rule: "has(self.limits) && 'app' in self.labels",
            message: 'needs limits and app',
            ...rule,
          },
        ),
      );
    const failing = object({ labels: {} });

    it('moves the error to the fieldPath below the node, map keys in brackets', () => {
      expect(
        rendered(
          validateRules(schema({ fieldPath: '.limits.cpu' }), failing, undefined, []).errors,
        ),
      ).toEqual(['spec.limits.cpu: Invalid value: "object": needs limits and app']);
      expect(
        rendered(
          validateRules(schema({ fieldPath: ".labels['app']" }), failing, undefined, []).errors,
        ),
      ).toEqual(['spec.labels[app]: Invalid value: "object": needs limits and app']);
    });

    it('ignores a fieldPath the schema does not declare', () => {
      expect(
        rendered(validateRules(schema({ fieldPath: '.nowhere' }), failing, undefined, []).errors),
      ).toEqual(['spec: Invalid value: "object": needs limits and app']);
    });

    it.each([
      ['FieldValueForbidden', 'spec: Forbidden: needs limits and app'],
      ['FieldValueRequired', 'spec: Required value: needs limits and app'],
      ['FieldValueDuplicate', 'spec: Duplicate value: "object"'],
      ['FieldValueInvalid', 'spec: Invalid value: "object": needs limits and app'],
    ] as const)('refuses with reason %s as its field error', (reason, text) => {
      const [error] = validateRules(schema({ reason }), failing, undefined, []).errors;

      expect(error?.reason).toBe(reason);
      expect(rendered(error ? [error] : [])).toEqual([text]);
    });
  });

  describe('rules on list items and map values', () => {
    const schema = resource({
      type: 'object',
      properties: {
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: withRules(
            { type: 'object', properties: { name: { type: 'string' }, port: { type: 'integer' } } },
            { rule: 'self.port > 0', message: 'port must be positive' },
            { rule: 'self.port == oldSelf.port', message: 'a port keeps its number' },
          ),
        },
        tags: {
          type: 'array',
          items: withRules(
            { type: 'string' },
            { rule: 'self == oldSelf', message: 'tags are fixed' },
          ),
        },
        env: {
          type: 'object',
          additionalProperties: withRules(
            { type: 'string' },
            { rule: "self != ''", message: 'no empty value' },
          ),
        },
      },
    });

    it('run once per element, naming its index or key', () => {
      const outcome = validateRules(
        schema,
        object({
          ports: [
            { name: 'http', port: 80 },
            { name: 'debug', port: 0 },
          ],
          env: { A: 'x', B: '' },
        }),
        undefined,
        [],
      );

      expect(rendered(outcome.errors)).toEqual([
        'spec.ports[1]: Invalid value: "object": port must be positive',
        'spec.env[B]: Invalid value: "string": no empty value',
      ]);
    });

    it('compare a map-list item with the old item of the same key, wherever it moved', () => {
      const old = object({
        ports: [
          { name: 'http', port: 80 },
          { name: 'debug', port: 9000 },
        ],
      });
      const moved = object({
        ports: [
          { name: 'debug', port: 9001 },
          { name: 'http', port: 80 },
          { name: 'metrics', port: 9090 },
        ],
      });

      expect(rendered(validateRules(schema, moved, old, []).errors)).toEqual([
        'spec.ports[0]: Invalid value: "object": a port keeps its number',
      ]);
    });

    it('have no old item in an atomic list, so its transition rules do not run', () => {
      expect(
        validateRules(schema, object({ tags: ['b'] }), object({ tags: ['a'] }), []).errors,
      ).toEqual([]);
    });
  });

  describe('rules that do not compile', () => {
    const schema = resource({
      type: 'object',
      properties: {
        a: withRules({ type: 'string' }, { rule: 'self ==' }),
        b: withRules({ type: 'string' }, { rule: "self.isSorted() && self == ''" }),
        c: withRules({ type: 'string' }, { rule: 'self == other' }),
        d: withRules({ type: 'string' }, { rule: 'size(self)' }),
        e: withRules({ type: 'string' }, { rule: "self != ''", message: 'e is set' }),
      },
    });

    it('are reported where they sit, as the real server reports one it could not compile', () => {
      const outcome = validateRules(
        schema,
        object({ a: 'x', b: 'x', c: 'x', d: 'x', e: '' }),
        undefined,
        [],
      );

      expect(rendered(outcome.errors)).toEqual([
        'spec.a: Invalid value: "string": rule compile error: compilation failed: ERROR: <input>:1:6: Syntax error: found = but expecting end of input',
        "spec.b: Invalid value: \"string\": rule compile error: compilation failed: ERROR: <input>:1:5: undeclared reference to 'isSorted' (in container '') (a Kubernetes CEL library function the API server double lacks)",
        "spec.c: Invalid value: \"string\": rule compile error: compilation failed: ERROR: <input>:1:9: undeclared reference to 'other' (in container '')",
        'spec.d: Invalid value: "string": rule compile error: cel expression must evaluate to a bool',
        'spec.e: Invalid value: "string": e is set',
      ]);
    });

    it('refuse the CRD that carries them, naming each rule by its path in the schema', async () => {
      const server = await KubeApiServer.start();
      try {
        const crd = {
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'things.example.dev' },
          spec: {
            group: 'example.dev',
            scope: 'Namespaced',
            names: { plural: 'things', singular: 'thing', kind: 'Thing', listKind: 'ThingList' },
            versions: [
              { name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema } },
            ],
          },
        };
        const response = await fetch(
          `${server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`,
          {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(crd),
          },
        );
        const status = (await response.json()) as { code: number; message: string };
        expect(status.code).toBe(422);
        const at = 'spec.versions[0].schema.openAPIV3Schema.properties[spec]';
        expect(status.message).toContain(
          `CustomResourceDefinition.apiextensions.k8s.io "things.example.dev" is invalid: [${at}.properties[a].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self ==", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:6: Syntax error: found = but expecting end of input, `,
        );
        expect(status.message).toContain(`${at}.properties[c].x-kubernetes-validations[0].rule`);
        expect(status.message).not.toContain('properties[e]');
        expect(server.objects('apiextensions.k8s.io/v1', 'customresourcedefinitions')).toEqual([]);
      } finally {
        await server.stop();
      }
    });
  });

  describe('after the schema checks', () => {
    const schema = resource(
      withRules(
        { type: 'object', properties: { n: { type: 'integer' } } },
        {
          rule: 'self.n > 0',
          message: 'n is positive',
        },
      ),
    );

    it('do not run when those found the object malformed, and say so', () => {
      const earlier = [fieldErrors.required('spec.n')];

      expect(rendered(validateRules(schema, object({ n: 0 }), undefined, earlier).errors)).toEqual([
        '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
      ]);
    });

    it('still run after an error that is no blocking one (a pattern, a minimum)', () => {
      const earlier = [fieldErrors.invalid('spec.name', 'x', 'spec.name in body should match')];

      expect(rendered(validateRules(schema, object({ n: 0 }), undefined, earlier).errors)).toEqual([
        'spec: Invalid value: "object": n is positive',
      ]);
    });

    it('do nothing for a schema without rules', () => {
      const plain = resource({ type: 'object' });

      expect(validateRules(plain, object({}), undefined, [fieldErrors.required('spec.n')])).toEqual(
        {
          errors: [],
          warnings: [],
        },
      );
    });
  });

  describe('ratcheting on update', () => {
    const schema = resource({
      type: 'object',
      properties: {
        image: withRules(
          { type: 'string' },
          { rule: "self.contains(':')", message: 'image needs a tag' },
        ),
        other: { type: 'string' },
      },
    });

    it('lets an unchanged failing value through with a warning', () => {
      const old = object({ image: 'web', other: 'a' });

      expect(validateRules(schema, object({ image: 'web', other: 'b' }), old, [])).toEqual({
        errors: [],
        warnings: ['spec.image: Invalid value: "string": image needs a tag'],
      });
    });

    it('sees an object whose keys were only reordered as unchanged', () => {
      const limits = resource(
        withRules(
          { type: 'object', properties: { min: { type: 'integer' }, max: { type: 'integer' } } },
          { rule: 'self.min <= self.max', message: 'min must not exceed max' },
        ),
      );

      expect(
        validateRules(limits, object({ max: 1, min: 3 }), object({ min: 3, max: 1 }), []),
      ).toEqual({
        errors: [],
        warnings: ['spec: Invalid value: "object": min must not exceed max'],
      });
    });

    it('refuses a changed failing value', () => {
      const old = object({ image: 'web' });

      expect(rendered(validateRules(schema, object({ image: 'api' }), old, []).errors)).toEqual([
        'spec.image: Invalid value: "string": image needs a tag',
      ]);
    });
  });
});
