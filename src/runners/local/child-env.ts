/** The programs the local runner starts for the build proper. */
export type ChildTool = 'git' | 'buildah' | 'pack' | 'packer';

type Variables = Readonly<Record<string, string>>;

/**
 * Which environment a child gets, said by the caller and built by the process port from the
 * allowlist (never from kiln's own): a tool of the build proper with the build's declared
 * variables and what kiln gives this one run, or an SBOM or scan CLI with its own settings.
 */
export type ChildEnvironment =
  | { readonly tool: ChildTool; readonly declared?: Variables; readonly own?: Variables }
  | { readonly tool: 'step'; readonly settings?: Variables };

/** The variables of `environment`, from the allowlisted ones kiln was started with (pure). */
export function environmentOf(
  inherited: Variables,
  environment: ChildEnvironment,
): Record<string, string> {
  return environment.tool === 'step'
    ? stepEnvironment(inherited, environment.settings)
    : childEnvironment(inherited, environment.tool, environment.declared, environment.own);
}

/**
 * The environment of one child process (pure), never kiln's own: the allowlisted variables kiln
 * was started with (`KilnConfig.childEnvironment`), what kiln fixes for the tool (`LC_ALL=C` so
 * messages read the same everywhere, buildah's chroot isolation), and for the tools that read
 * their environment (pack, packer) the variables the build declares. Declared variables add to
 * the machine's, never replace them: a build cannot point kiln's tools at another PATH, proxy or
 * trust store. `own` is what kiln itself gives one run of a tool (git's credential helper for the
 * project's credentials): it wins over the machine's.
 */
export function childEnvironment(
  inherited: Variables,
  tool: ChildTool,
  declared: Variables = {},
  own: Variables = {},
): Record<string, string> {
  return {
    ...(tool === 'pack' || tool === 'packer' ? declared : {}),
    ...inherited,
    ...own,
    LC_ALL: 'C',
    ...(tool === 'buildah' ? { BUILDAH_ISOLATION: 'chroot' } : {}),
  };
}

/**
 * The environment of an SBOM or scan CLI (pure): what every child of kiln gets (the allowlist and
 * LC_ALL=C, as for git, which has no settings of its own) and the tool's own settings from
 * build-methods/steps.ts; never the build's declared variables.
 */
export function stepEnvironment(
  inherited: Variables,
  settings: Variables = {},
): Record<string, string> {
  return { ...childEnvironment(inherited, 'git'), ...settings };
}
