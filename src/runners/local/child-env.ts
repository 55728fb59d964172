/** The programs the local runner starts. */
export type ChildTool = 'git' | 'buildah' | 'pack' | 'packer';

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
  inherited: Readonly<Record<string, string>>,
  tool: ChildTool,
  declared: Readonly<Record<string, string>> = {},
  own: Readonly<Record<string, string>> = {},
): Record<string, string> {
  return {
    ...(tool === 'pack' || tool === 'packer' ? declared : {}),
    ...inherited,
    ...own,
    LC_ALL: 'C',
    ...(tool === 'buildah' ? { BUILDAH_ISOLATION: 'chroot' } : {}),
  };
}
