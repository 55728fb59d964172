/**
 * The images a build Job runs, each pinned by digest (DESIGN.md, "The reconcile loop"; digests are
 * immutable, so `imagePullPolicy: IfNotPresent` cannot pick up a moved tag). They are defaults:
 * an operator overrides them through `JobSettings` (config wiring checks `isPinnedByDigest`).
 *
 * Where each digest comes from (docs/adr/0014-job-translation.md): neither was pulled or run from
 * here (no registry access); verify before a release, as `../shared/reference/builders.md` asks.
 *
 * Not pinned yet, for the build-methods issue (builders.md gives tags or names only, no digest):
 * buildx `moby/buildkit:v0.32.2-rootless` (Shipwright's pin, §2.2), the Paketo Jammy builders
 * `paketobuildpacks/builder-jammy-{base,full,tiny}` (no tag, §2.4) and `hashicorp/packer` (tags
 * `light`, `light-$VERSION`, `latest`, §2.5). No digest is invented for them.
 */

/**
 * kaniko, the maintained fork (the Google repository is archived and its images unmaintained).
 * builders.md §2.1: "Tekton catalog `task/kaniko/0.8` default
 * `ghcr.io/osscontainertools/kaniko:v1.27.6@sha256:95779f52…` [TKC]"; the same string is the
 * `BUILDER_IMAGE` default of tektoncd/catalog task/kaniko/0.8/kaniko.yaml.
 */
export const KANIKO_IMAGE =
  'ghcr.io/osscontainertools/kaniko:v1.27.6@sha256:95779f52d460ca70b65a4f4679d4f5163ad6c33edea3303dc8bbff847de5e05c';

/**
 * git and a POSIX shell, for the `source` init container. builders.md names no git image with a
 * tag or digest (only Shipwright's `ghcr.io/shipwright-io/build/git`, §3.1, whose entrypoint is
 * Shipwright's own clone binary). This pin is the `BASE_IMAGE` default of tektoncd/catalog
 * task/git-cli/0.5/git-cli.yaml, the same catalog builders.md takes the kaniko pin from. It is
 * git 2.39 (2023): replace it with a current pin once one can be verified.
 */
export const GIT_IMAGE =
  'cgr.dev/chainguard/git:root-2.39@sha256:7759f87050dd8bacabe61354d75ccd7f864d6b6f8ec42697db7159eccd491139';

/** Builder images by builder name. The `container` method builds with kaniko too. */
export const BUILDER_IMAGES = { kaniko: KANIKO_IMAGE } as const;

export type BuilderName = keyof typeof BUILDER_IMAGES;

const PINNED = /^[^\s@]+@sha256:[0-9a-f]{64}$/;

/** True when `image` names its content by a sha256 digest (`name[:tag]@sha256:<64 hex>`). */
export function isPinnedByDigest(image: string): boolean {
  return PINNED.test(image);
}
