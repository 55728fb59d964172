/*
 * Reads a packer template with a real parser and checks a manifest's `builders`, `provisioners`
 * and `post_processors` against what it declares, rather than trusting the manifest: legacy
 * JSON templates with JSON.parse, HCL2 templates with @cdktf/hcl2json (hashicorp/hcl compiled to
 * WebAssembly, the parser packer itself uses). The entries are kept as sent; only their types
 * (and a builder's name) are compared.
 *
 * What a manifest entry may look like:
 * - builders: `"<type>"`, `"source.<type>.<name>"`, `{ type }` or `{ type, name }` (other keys
 *   ignored). A type alone matches any builder or source of that type; a name must match too: an
 *   HCL2 `source "<type>" "<name>"` block, or a JSON builder's `name` (which defaults to its type).
 * - provisioners: `"<type>"` or `{ type }`, matching a `provisioner "<type>"` block of any build
 *   (HCL2) or an entry of `provisioners` (JSON).
 * - post_processors: `"<type>"`, `{ type }` or an array of those (a chain, as in JSON templates),
 *   matching a `post-processor "<type>"` block of any build, inside `post-processors` blocks too
 *   (HCL2), or any entry of `post-processors` at any depth (JSON).
 * Order is not compared: the HCL2 parser groups blocks by type.
 */
import { isPlainObject } from '../manifest/fields.js';
import type { Details } from '../manifest/types.js';

/** A builder (JSON) or source (HCL2) a template declares. */
export interface DeclaredBuilder {
  readonly type: string;
  /** A JSON builder's name (its type when unnamed); an HCL2 source's name; undefined if missing. */
  readonly name: string | undefined;
}

export interface TemplateDeclarations {
  readonly syntax: 'json' | 'hcl2';
  readonly builders: readonly DeclaredBuilder[];
  /** Distinct types, sorted. */
  readonly provisioners: readonly string[];
  readonly postProcessors: readonly string[];
}

export type TemplateRead =
  | { readonly ok: true; readonly declarations: TemplateDeclarations }
  | { readonly ok: false; readonly problem: string };

/** The manifest fields checked against a template, as sent. */
export interface TemplateEntries {
  readonly builders?: readonly unknown[];
  readonly provisioners?: readonly unknown[];
  readonly post_processors?: readonly unknown[];
}

/** The file name packer is given: it reads `*.json` as legacy JSON, `*.pkr.hcl` as HCL2. */
export const JSON_TEMPLATE_FILE = 'template.json';
export const HCL_TEMPLATE_FILE = 'template.pkr.hcl';

/**
 * Legacy JSON when the text starts with `{` (an HCL2 body cannot), else HCL2. HCL2 in JSON syntax
 * (`.pkr.json`) is not told apart: kiln runs every JSON template as legacy JSON.
 */
export function isJsonTemplate(text: string): boolean {
  return text.trimStart().startsWith('{');
}

/** A legacy JSON template: `builders[]`, `provisioners[]`, `post-processors[]`. */
export function readJsonTemplate(text: string): TemplateRead {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { ok: false, problem: `is not valid JSON: ${jsonErrorMessage(error, text)}` };
  }
  if (!isPlainObject(parsed)) return { ok: false, problem: 'a JSON template must be an object' };
  if (!Array.isArray(parsed.builders)) {
    return {
      ok: false,
      problem:
        'a JSON template is run as a legacy JSON template, which needs a "builders" array (HCL2 in JSON syntax is not supported: send HCL2 in its native syntax)',
    };
  }
  const builders = parsed.builders.flatMap((builder: unknown): DeclaredBuilder[] => {
    const type = typeOf(builder);
    if (type === undefined) return [];
    const name = isPlainObject(builder) && typeof builder.name === 'string' ? builder.name : type;
    return [{ type, name }];
  });
  return {
    ok: true,
    declarations: {
      syntax: 'json',
      builders,
      provisioners: distinct(asArray(parsed.provisioners).map(typeOf)),
      postProcessors: distinct(asArray(parsed['post-processors']).flat(1).map(typeOf)),
    },
  };
}

/**
 * An HCL2 template, as @cdktf/hcl2json renders it: `source "t" "n" {}` becomes
 * `{ source: { t: { n: [{}] } } }`; each `build {}` an element of `build`, with
 * `provisioner: { t: [...] }`, `"post-processor": { t: [...] }` and
 * `"post-processors": [{ "post-processor": { t: [...] } }]`. A parse error is the parser's message,
 * which names the line and column (`template.pkr.hcl:3,7-8: …`).
 */
export async function readHclTemplate(text: string): Promise<TemplateRead> {
  let parsed: unknown;
  try {
    // Loaded on first use: the WebAssembly module is large, and only HCL2 templates need it.
    const { parse } = await import('@cdktf/hcl2json');
    parsed = await parse(HCL_TEMPLATE_FILE, text);
  } catch (error) {
    return { ok: false, problem: `is neither JSON nor valid HCL2: ${hclErrorMessage(error)}` };
  }
  const body = isPlainObject(parsed) ? parsed : {};
  const builders: DeclaredBuilder[] = [];
  if (isPlainObject(body.source)) {
    for (const [type, byName] of Object.entries(body.source)) {
      // A source block with one label parses as an array: its name is missing (packer refuses it).
      if (isPlainObject(byName)) {
        for (const name of Object.keys(byName)) builders.push({ type, name });
      } else {
        builders.push({ type, name: undefined });
      }
    }
  }
  const builds = asArray(body.build).filter(isPlainObject);
  const blockTypes = (block: unknown): string[] => (isPlainObject(block) ? Object.keys(block) : []);
  return {
    ok: true,
    declarations: {
      syntax: 'hcl2',
      builders,
      provisioners: distinct(builds.flatMap((build) => blockTypes(build.provisioner))),
      postProcessors: distinct(
        builds.flatMap((build) => [
          ...blockTypes(build['post-processor']),
          ...asArray(build['post-processors']).flatMap((chain) =>
            isPlainObject(chain) ? blockTypes(chain['post-processor']) : [],
          ),
        ]),
      ),
    },
  };
}

/**
 * Problems of `entries` against `declarations`, keyed by the manifest field
 * (`manifest.build_config.builders`): each entry that names nothing the template declares, then
 * what the template does declare. Empty when every entry matches.
 */
export function entryProblems(
  declarations: TemplateDeclarations,
  entries: TemplateEntries,
): Details {
  const details: Details = {};
  const report = (field: string, problems: string[], declared: string[]): void => {
    if (problems.length === 0) return;
    const list = declared.length === 0 ? 'none' : declared.join(', ');
    details[`manifest.build_config.${field}`] =
      `${problems.join('; ')} (the template declares ${list})`;
  };

  const builders = (entries.builders ?? []).flatMap((entry, index) => {
    const wanted = builderEntry(entry);
    if (wanted === undefined) return [`entry ${index} has no type`];
    const found = declarations.builders.some(
      (declared) =>
        declared.type === wanted.type &&
        (wanted.name === undefined || declared.name === wanted.name),
    );
    if (found) return [];
    return [
      wanted.name === undefined
        ? `entry ${index}: no builder of type "${wanted.type}"`
        : `entry ${index}: no builder "${wanted.type}" named "${wanted.name}"`,
    ];
  });
  report(
    'builders',
    builders,
    declarations.builders.map((builder) => describeBuilder(builder, declarations.syntax)),
  );

  const provisioners = (entries.provisioners ?? []).flatMap((entry, index) =>
    typeProblems(entry, `${index}`, declarations.provisioners, 'provisioner'),
  );
  report('provisioners', provisioners, [...declarations.provisioners]);

  const postProcessors = (entries.post_processors ?? []).flatMap((entry, index) =>
    Array.isArray(entry)
      ? entry.flatMap((link, inner) =>
          typeProblems(link, `${index}.${inner}`, declarations.postProcessors, 'post-processor'),
        )
      : typeProblems(entry, `${index}`, declarations.postProcessors, 'post-processor'),
  );
  report('post_processors', postProcessors, [...declarations.postProcessors]);
  return details;
}

function typeProblems(
  entry: unknown,
  at: string,
  declared: readonly string[],
  kind: string,
): string[] {
  const type = typeOf(entry);
  if (type === undefined) return [`entry ${at} has no type`];
  return declared.includes(type) ? [] : [`entry ${at}: no ${kind} of type "${type}"`];
}

/** A builder entry's type and name: `"t"`, `"source.t.n"`, `{ type: "t", name?: "n" }`. */
export function builderEntry(
  entry: unknown,
): { type: string; name: string | undefined } | undefined {
  if (typeof entry === 'string') {
    const reference = /^source\.([^.]+)\.([^.]+)$/.exec(entry);
    if (reference?.[1] !== undefined && reference[2] !== undefined) {
      return { type: reference[1], name: reference[2] };
    }
    return entry === '' ? undefined : { type: entry, name: undefined };
  }
  const type = typeOf(entry);
  if (type === undefined || !isPlainObject(entry)) return undefined;
  return { type, name: typeof entry.name === 'string' ? entry.name : undefined };
}

function describeBuilder(builder: DeclaredBuilder, syntax: 'json' | 'hcl2'): string {
  if (syntax === 'hcl2') {
    return builder.name === undefined
      ? `source "${builder.type}" (no name)`
      : `source.${builder.type}.${builder.name}`;
  }
  return builder.name === builder.type ? builder.type : `${builder.type} "${builder.name}"`;
}

/** `"t"` or `{ type: "t" }`: the type, or undefined. */
function typeOf(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry === '' ? undefined : entry;
  return isPlainObject(entry) && typeof entry.type === 'string' && entry.type !== ''
    ? entry.type
    : undefined;
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function distinct(types: ReadonlyArray<string | undefined>): string[] {
  return [...new Set(types.filter((type): type is string => type !== undefined))].sort();
}

/** JSON.parse's message, with the line and column when it gives only a position (Node 20). */
function jsonErrorMessage(error: unknown, text: string): string {
  const message = error instanceof Error ? error.message : String(error);
  const position = /at position (\d+)/.exec(message)?.[1];
  if (position === undefined || /line \d+/.test(message)) return message;
  const before = text.slice(0, Number(position)).split('\n');
  return `${message} (line ${before.length} column ${(before.at(-1)?.length ?? 0) + 1})`;
}

/** `parse config: [template.pkr.hcl:2,6-3,1: Invalid expression; …]` → the part in brackets. */
function hclErrorMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return /^parse config: \[(.*)\]$/s.exec(message)?.[1] ?? message;
}
