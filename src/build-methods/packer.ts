import { isPlainObject } from './fields.js';
import { notYetOnKubernetes } from './job.js';
import { blank, type BuildMethod, NO_EXCLUSIVE_FIELDS } from './method.js';
import { MANIFEST_MESSAGES } from './types.js';

const at = (key: string): string => `manifest.build_config.${key}`;

/**
 * Packer: a template (legacy JSON or HCL2) with variables. `builders` given are checked against a
 * legacy JSON template's `builders[].type`; HCL2 (either syntax) is accepted as sent until an HCL
 * parser checks it (DESIGN.md).
 */
export const packer: BuildMethod = {
  name: 'packer',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    const template = draft.config.packer_template;
    if (template === undefined || blank(template)) {
      details[at('packer_template')] ??= MANIFEST_MESSAGES.packerTemplateRequired;
    } else if (draft.config.builders !== undefined) {
      checkBuildersAgainstTemplate(template, draft.config.builders, at('builders'), details);
    }
  },
  localPlan(spec) {
    const template = spec.config.packer_template ?? '';
    const variables = Object.fromEntries(
      Object.entries(spec.config.variables ?? {}).map(([name, value]) => [
        name,
        typeof value === 'string' ? value : JSON.stringify(value),
      ]),
    );
    return {
      kind: 'packer',
      template,
      templateFile: isJsonObject(template) ? 'template.json' : 'template.pkr.hcl',
      variables,
      env: { ...spec.env, ...spec.buildArgs },
    };
  },
  jobSpec: () => notYetOnKubernetes('packer'),
};

/** Only legacy JSON templates list `builders`; HCL2 (either syntax) is not checked here. */
function checkBuildersAgainstTemplate(
  template: string,
  builders: unknown[],
  path: string,
  details: Record<string, string>,
): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(template);
  } catch {
    return;
  }
  if (!isPlainObject(parsed) || !Array.isArray(parsed.builders)) return;
  const declared = new Set(
    parsed.builders.flatMap((builder) =>
      isPlainObject(builder) && typeof builder.type === 'string' ? [builder.type] : [],
    ),
  );
  const problems = builders.flatMap((builder, index) => {
    if (!isPlainObject(builder) || typeof builder.type !== 'string') {
      return [`entry ${index} has no type`];
    }
    return declared.has(builder.type)
      ? []
      : [`type "${builder.type}" is not a builder of the template`];
  });
  if (problems.length > 0) {
    const known = declared.size > 0 ? [...declared].join(', ') : 'none';
    details[path] = `${problems.join('; ')} (template builders: ${known})`;
  }
}

function isJsonObject(text: string): boolean {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed);
  } catch {
    return false;
  }
}
