// npm run gen:crd-types: writes src/operator/api/build-resource.generated.ts from the Build CRD
// (crds/builds.kiln.dev.yaml), so the CRD is the one source of truth for the resource's shape.
//   --stdout  print the generated file instead of writing it (test/crd.spec.ts compares)
//   --check   exit 1 when the checked-in file differs
// CommonJS (.cjs) because ESLint's typed config covers only files in tsconfig (as kube-double.cjs).
const { readFileSync, writeFileSync } = require('node:fs');
const { join, relative } = require('node:path');
const prettier = require('prettier');
const { parse } = require('yaml');

const ROOT = join(__dirname, '..');
const CRD = join(ROOT, 'crds/builds.kiln.dev.yaml');
const OUT = join(ROOT, 'src/operator/api/build-resource.generated.ts');

/** Object schemas that become named interfaces, by path (`[]` is an array's items). */
const INTERFACES = {
  spec: 'BuildResourceSpec',
  'spec.source': 'BuildResourceSource',
  'spec.config': 'BuildResourceConfig',
  'spec.config.paketo_config': 'BuildResourcePaketoConfig',
  'spec.output': 'BuildResourceOutput',
  status: 'BuildResourceStatus',
  'status.conditions[]': 'BuildCondition',
  'status.progress': 'BuildProgress',
};

/** Enums exported as a const array (for code that checks values) and its union type. */
const ENUMS = {
  'spec.form': ['BUILD_FORMS', 'BuildForm'],
  'spec.method': ['BUILD_RESOURCE_METHODS', 'BuildResourceMethod'],
  'status.state': ['BUILD_STATES', 'BuildState'],
  'status.failureReason': ['BUILD_FAILURE_REASONS', 'BuildFailureReason'],
  'status.conditions[].status': ['CONDITION_STATUSES', 'ConditionStatus'],
};

const join_ = (path, key) => (path === '' ? key : `${path}.${key}`);
const literal = (value) => `'${String(value).replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const WIDTH = 100;

/** A JSDoc comment, on one line when it fits, else wrapped to the repository's print width. */
function comment(text, indent = '') {
  if (text === undefined) return '';
  const words = text.trim().replace(/\*\//g, '*\\/').split(/\s+/);
  const oneLine = `${indent}/** ${words.join(' ')} */`;
  if (oneLine.length <= WIDTH) return `${oneLine}\n`;
  const lines = [];
  let line = '';
  for (const word of words) {
    if (line !== '' && `${indent} * ${line} ${word}`.length > WIDTH) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  lines.push(line);
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}\n`).join('')}${indent} */\n`;
}

/** The TypeScript type of a schema node; named interfaces and enums are referenced by name. */
function typeOf(schema, path) {
  if (INTERFACES[path]) return INTERFACES[path];
  if (ENUMS[path]) return ENUMS[path][1];
  if (schema.enum) return schema.enum.map(literal).join(' | ');
  switch (schema.type) {
    case undefined:
      if (schema['x-kubernetes-preserve-unknown-fields']) return 'unknown';
      throw new Error(`${path}: a schema without a type`);
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array': {
      const items = typeOf(schema.items, `${path}[]`);
      return /[\s|]/.test(items) ? `(${items})[]` : `${items}[]`;
    }
    case 'object':
      if (schema.properties) return `{\n${members(schema, path)}}`;
      if (typeof schema.additionalProperties === 'object')
        return `Record<string, ${typeOf(schema.additionalProperties, `${path}.*`)}>`;
      return 'Record<string, unknown>';
    default:
      throw new Error(`${path}: unsupported type ${schema.type}`);
  }
}

function members(schema, path) {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties)
    .map(([key, child]) => {
      const notes = [
        child.description,
        child.format === 'date-time' ? 'An RFC 3339 date-time.' : undefined,
        child.default === undefined ? undefined : `Default: ${JSON.stringify(child.default)}.`,
      ].filter((note) => note !== undefined);
      const name = /^[A-Za-z_$][\w$]*$/.test(key) ? key : literal(key);
      return `${comment(notes.length ? notes.join(' ') : undefined, '  ')}  ${name}${
        required.has(key) ? '' : '?'
      }: ${typeOf(child, join_(path, key))};\n`;
    })
    .join('');
}

/** The schema node at a path of INTERFACES/ENUMS. */
function at(root, path) {
  return path.split('.').reduce((node, part) => {
    const [key, items] = part.endsWith('[]') ? [part.slice(0, -2), true] : [part, false];
    const child = node.properties?.[key];
    if (child === undefined) throw new Error(`the CRD has no ${path}`);
    return items ? child.items : child;
  }, root);
}

/** The defaults under a node, nested as the object they fill (only where some default is). */
function defaultsOf(schema) {
  const result = {};
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    if (child.default !== undefined) result[key] = child.default;
    else if (child.properties) {
      const nested = defaultsOf(child);
      if (Object.keys(nested).length > 0) result[key] = nested;
    }
  }
  return result;
}

function generate(crdText) {
  const crd = parse(crdText);
  const { group, names, versions } = crd.spec;
  const storage = versions.filter((v) => v.storage);
  if (storage.length !== 1) throw new Error('the CRD must have exactly one storage version');
  const [version] = storage;
  const root = version.schema.openAPIV3Schema;
  const out = [
    `// Generated by scripts/gen-crd-types.cjs from ${relative(ROOT, CRD)} (${version.name}).`,
    '// Do not edit: change the CRD and run `npm run gen:crd-types`; test/crd.spec.ts fails when',
    '// this file and the CRD differ.',
    '',
    `export const BUILD_GROUP = ${literal(group)};`,
    `export const BUILD_VERSION = ${literal(version.name)};`,
    `export const BUILD_API_VERSION = ${literal(`${group}/${version.name}`)};`,
    `export const BUILD_KIND = ${literal(names.kind)};`,
    `export const BUILD_PLURAL = ${literal(names.plural)};`,
    '',
  ];
  for (const [path, [constant, type]] of Object.entries(ENUMS)) {
    const node = at(root, path);
    if (!node.enum) throw new Error(`${path} is not an enum`);
    out.push(
      comment(node.description) +
        `export const ${constant} = [${node.enum.map(literal).join(', ')}] as const;`,
      `export type ${type} = (typeof ${constant})[number];`,
      '',
    );
  }
  for (const [path, name] of Object.entries(INTERFACES)) {
    const node = at(root, path);
    if (node.type !== 'object' || !node.properties) throw new Error(`${path} is not an object`);
    out.push(`${comment(node.description)}export interface ${name} {\n${members(node, path)}}`, '');
  }
  out.push(
    "/** What the API server fills in when a Build leaves these out (the CRD's defaults). */",
    `export const BUILD_SPEC_DEFAULTS = ${JSON.stringify(defaultsOf(at(root, 'spec')))} as const;`,
    '',
  );
  return out.join('\n');
}

async function main() {
  const options = await prettier.resolveConfig(OUT);
  const text = await prettier.format(generate(readFileSync(CRD, 'utf8')), {
    ...options,
    filepath: OUT,
  });
  const mode = process.argv[2];
  if (mode === '--stdout') process.stdout.write(text);
  else if (mode === '--check') {
    if (readFileSync(OUT, 'utf8') !== text) {
      console.error(`${relative(ROOT, OUT)} is out of date: run npm run gen:crd-types`);
      process.exitCode = 1;
    }
  } else {
    writeFileSync(OUT, text);
    console.log(`wrote ${relative(ROOT, OUT)}`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
