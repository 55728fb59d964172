import type { components } from '../../api/schema.gen.js';

type Schemas = components['schemas'];
export type TenantPermission = NonNullable<Schemas['CreateApiTokenDto']['permissions']>[number];
/** What an API token may carry: never `token:manage` (the API refuses it, docs/security.md). */
export type TokenPermission = Exclude<TenantPermission, 'token:manage'>;
/** Field → message, as a form shows them. */
export type Problems = Readonly<Record<string, string>>;

/**
 * What each permission lets a token do, in the order the token form lists them. A Record over the
 * API's own list: a permission the API adds breaks the console's type check until it is named here.
 */
export const TOKEN_PERMISSIONS: Readonly<Record<TokenPermission, string>> = {
  'build:list': 'list builds',
  'build:read': 'read builds, their logs, SBOMs and scans',
  'build:create': 'create, start and retry builds',
  'build:cancel': 'cancel builds',
  'build:delete': 'delete builds',
  'member:manage': "manage the tenant's members",
  'project:manage': "manage the tenant's projects",
  'settings:manage': "manage the tenant's settings and the projects' git credentials",
  'audit:read': "read the tenant's audit log",
  'trigger:manage': "manage the projects' build triggers and see their deliveries",
};

/** The permissions a new token may carry: the caller's in this tenant, without `token:manage`. */
export function grantable(permissions: readonly string[]): TokenPermission[] {
  return (Object.keys(TOKEN_PERMISSIONS) as TokenPermission[]).filter((permission) =>
    permissions.includes(permission),
  );
}

export interface TokenForm {
  readonly name: string;
  readonly permissions: readonly TokenPermission[];
  /** Days until it expires, as typed; empty for the API's default. */
  readonly days: string;
}

/**
 * The token form as POST /tokens takes it, or what stops it, under the API's own field names (so
 * the server's 400 lands on the same fields).
 */
export function tokenRequest(
  form: TokenForm,
): { readonly body: Schemas['CreateApiTokenDto'] } | { readonly problems: Problems } {
  const problems: Record<string, string> = {};
  const name = form.name.trim();
  if (name === '') problems['name'] = 'Give the token a name, e.g. the pipeline that uses it';
  else if (name.length > 100) problems['name'] = 'At most 100 characters';
  if (form.permissions.length === 0) problems['permissions'] = 'Choose at least one permission';
  const days = form.days.trim();
  if (days !== '' && !(/^\d{1,5}$/.test(days) && Number(days) >= 1)) {
    problems['expires_in_days'] = 'A whole number of days, 1 or more';
  }
  if (Object.keys(problems).length > 0) return { problems };
  return {
    body: {
      name,
      permissions: [...form.permissions],
      ...(days !== '' && { expires_in_days: Number(days) }),
    },
  };
}

/** A settings text area's JSON as the object PUT /settings/… takes, or why it is not one. */
export function parseSettings(
  text: string,
): { readonly settings: Record<string, unknown> } | { readonly problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (failure) {
    return { problem: `Not valid JSON: ${failure instanceof Error ? failure.message : ''}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { problem: 'Must be a JSON object: { "name": value, … }' };
  }
  return { settings: value as Record<string, unknown> };
}

/**
 * A settings 400's details in one line, each key relative to the settings object the text area
 * holds: `auth.tokenFile: must be an absolute file path; region: is required`.
 */
export function settingsProblem(details: Readonly<Record<string, string>>): string | undefined {
  const lines = Object.entries(details).map(([key, message]) => {
    const field = key.replace(/^settings\.?/, '');
    return field === '' ? message : `${field}: ${message}`;
  });
  return lines.length === 0 ? undefined : lines.join('; ');
}

/**
 * A 400's details split for a form: those on its fields (`field` or `field.…`, the first message
 * of each), and the rest as `key: message` lines for the form's notice.
 */
export function placeDetails(
  details: Readonly<Record<string, string>>,
  fields: readonly string[],
): { readonly placed: Problems; readonly rest: readonly string[] } {
  const placed: Record<string, string> = {};
  const rest: string[] = [];
  for (const [key, message] of Object.entries(details)) {
    const field = fields.find((f) => key === f || key.startsWith(`${f}.`));
    if (field === undefined) rest.push(`${key}: ${message}`);
    else placed[field] ??= message;
  }
  return { placed, rest };
}

export interface ProjectForm {
  readonly name: string;
  readonly git_repository_url: string;
  readonly default_registry: string;
}

type Project = Pick<Schemas['ProjectResponse'], 'name' | 'git_repository_url' | 'default_registry'>;

/** The create form as POST /projects takes it: values trimmed, empty optional fields left out. */
export function projectCreate(form: ProjectForm): Schemas['CreateProjectDto'] {
  const repository = form.git_repository_url.trim();
  const registry = form.default_registry.trim();
  return {
    name: form.name.trim(),
    ...(repository !== '' && { git_repository_url: repository }),
    ...(registry !== '' && { default_registry: registry }),
  };
}

/**
 * The edit form as PATCH /projects/{id} takes it: only what changed; a repository or registry
 * emptied is null (removed).
 */
export function projectChange(project: Project, form: ProjectForm): Schemas['UpdateProjectDto'] {
  const name = form.name.trim();
  const repository = form.git_repository_url.trim() || null;
  const registry = form.default_registry.trim() || null;
  return {
    ...(name !== project.name && { name }),
    ...(repository !== (project.git_repository_url ?? null) && { git_repository_url: repository }),
    ...(registry !== (project.default_registry ?? null) && { default_registry: registry }),
  };
}

/** The edit form's starting values: the project as it is. */
export function projectForm(project?: Project): ProjectForm {
  return {
    name: project?.name ?? '',
    git_repository_url: project?.git_repository_url ?? '',
    default_registry: project?.default_registry ?? '',
  };
}
