/**
 * The images a build Job runs, each pinned by digest (DESIGN.md, "The reconcile loop"; digests are
 * immutable, so `imagePullPolicy: IfNotPresent` cannot pick up a moved tag). They are defaults:
 * an operator overrides them through `JobSettings` (config wiring checks `isPinnedByDigest`).
 *
 * Where each digest comes from (docs/adr/0014-job-translation.md): neither was pulled or run from
 * here (no registry access); verify before a release, as `../shared/reference/builders.md` asks.
 *
 * Not pinned here: the Paketo builder is the user's choice (`paketo_config.builder`, a name that may
 * carry no digest; the Job says so in its notes), and `hashicorp/packer` (tags `light`,
 * `light-$VERSION`, `latest`, §2.5). No digest is invented for them.
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

/**
 * Rootless BuildKit, for buildx builds (`buildctl-daemonless.sh`). builders.md §2.2 names the tag:
 * "Shipwright pins `moby/buildkit:v0.32.2-rootless`" [SW-s/buildkit]. The digest is the one public
 * sources pin that tag to, found with the code search (`"buildkit:v0.32.2-rootless@sha256"`): the
 * same string in five unrelated repositories (a Jenkins shared library's pod test, a NixOS cluster
 * config citing BuildKit's examples/kubernetes/job.rootless.yaml, a Go test of a compose file, a
 * deploy script, and a write-up that calls it the multi-platform OCI image index digest). One
 * other repository pins `…@sha256:60d1f642…` to the same tag; the Jenkins test explicitly refuses
 * that one, so it is likely a single-platform manifest. Verify with
 * `crane digest moby/buildkit:v0.32.2-rootless` before a release.
 */
export const BUILDKIT_IMAGE =
  'moby/buildkit:v0.32.2-rootless@sha256:504731e577c20559c00f968f33219f30115e70be29ab96728d1d06e963fc494b';

/**
 * Builder images by builder name. The `container` method builds with kaniko too; paketo runs the
 * builder image the build names, so it has none here.
 */
export const BUILDER_IMAGES = { kaniko: KANIKO_IMAGE, buildkit: BUILDKIT_IMAGE } as const;

export type BuilderName = keyof typeof BUILDER_IMAGES;

/*
 * The SBOM and scan steps' images (docs/adr/0019-build-steps-and-artifacts.md). Each runs kiln's
 * constant step script, so each needs a shell (steps.ts STEP_SHELLS). Sources, found with the
 * code search and read at the commit named; none was pulled from here:
 *
 * - syft: the distroless `-debug` variant (busybox under /busybox, binary /syft, uid 65532),
 *   `.github/workflows/ci.yml` of Dever502/suppsystem @0a767e0 ("Create CycloneDX SBOM").
 * - trivy 0.72.0 (alpine, /bin/sh), tagged 2026-06-30, after the March 2026 compromise of
 *   0.69.4–0.69.6 (builders.md §2.7): `scripts/publish_image.sh` of SoftwareVerse/userverse
 *   @cb95c57 (its TRIVY_IMAGE default).
 * - snyk `linux` (ubuntu, /bin/sh): line 12 of konflux-ci/konflux-test's Dockerfile @291cdf3, a
 *   Renovate digest update of 2025-08-24. `linux` is a moving tag: the digest fixes the bytes, but
 *   the CLI version is not known; replace it with a versioned pin.
 *
 * Not pinned, because no public file pins an image of theirs that has a shell: grype (its
 * `-debug` images are never pinned by digest in the index; the plain image is FROM scratch) and
 * clair (only a 2021 4.2.0 pin). A build that names one is told the step is skipped until the
 * operator sets KILN_STEP_IMAGE_GRYPE / KILN_STEP_IMAGE_CLAIR.
 */

/** SBOM tools' images, by tool; a tool without one is skipped with a note. */
export const SBOM_TOOL_IMAGES: Readonly<Partial<Record<'syft' | 'grype' | 'trivy', string>>> = {
  syft: 'anchore/syft:v1.44.0-debug@sha256:6dd8fb28e1b799e7cadaff6be2ec6d555757c4eeec0c0e48162f20b042ffa1ff',
  trivy:
    'aquasec/trivy:0.72.0@sha256:cffe3f5161a47a6823fbd23d985795b3ed72a4c806da4c4df16266c02accdd6f',
};

/** Scanners' images, by tool; a tool without one is skipped with a note. */
export const SCAN_TOOL_IMAGES: Readonly<
  Partial<Record<'trivy' | 'clair' | 'grype' | 'snyk', string>>
> = {
  trivy:
    'aquasec/trivy:0.72.0@sha256:cffe3f5161a47a6823fbd23d985795b3ed72a4c806da4c4df16266c02accdd6f',
  snyk: 'docker.io/snyk/snyk:linux@sha256:3589b2be33980043326a0f3590486db0d3b4f3b2c5e27959e14fcded70f71b0a',
};

const PINNED = /^[^\s@]+@sha256:[0-9a-f]{64}$/;

/** True when `image` names its content by a sha256 digest (`name[:tag]@sha256:<64 hex>`). */
export function isPinnedByDigest(image: string): boolean {
  return PINNED.test(image);
}
