/**
 * The images a build Job runs, each pinned by a tag and its digest (a digest is immutable, so
 * `imagePullPolicy: IfNotPresent` cannot pick up a moved tag).
 * They are defaults: an operator overrides them through `JobSettings` (config wiring checks
 * `isPinnedByDigest`).
 *
 * None was pulled from here (no registry access). Each comment names where its digest comes from
 * and how many independent public sources agree; docs/adr/0032-image-pins.md holds the policy.
 * `make verify-pins` (scripts/verify-pins.sh) compares every pin with its tag before a release,
 * and Renovate (renovate.json) proposes each bump between releases.
 *
 * Not pinned here: the Paketo builder is the user's choice (`paketo_config.builder`, a name that
 * may carry no digest; the Job says so in its notes).
 */

/**
 * kaniko, the maintained fork (the Google repository is archived and its images unmaintained),
 * v1.28.5 (released 2026-09-20), the newest release any public source names. Its `-debug`
 * variant: the same executor plus busybox under /busybox. kiln never runs a shell in it (the Job
 * runs /kaniko/executor, kaniko.ts), so the plain executor image is the one to pin, but no tag of
 * a v1.28 release, plain or `-debug`, has the two sources ADR 0032 asks for. BELOW THE BAR.
 * What public sources show (code search, 2026-11-27):
 * - `v1.28.5-debug`, this digest: zystem/CiNim tools/image/kaniko-build.sh at
 *   1a930a5b0e24d0d87ca95ed04d5b0a8c8d736a0a and other files of that one project pin the tag and
 *   digest; one unrelated public design note records pulling and running
 *   `ghcr.io/osscontainertools/kaniko@sha256:d6d74217…` on 2026-10-08, naming no tag.
 * - `v1.28.5`, `738807f0…`: one source, jellebens/gitops .scripts/arc-mirror/artifacts.lock at
 *   77f5471d187d388072f8bffd23c62109406f5dae, "the multi-arch INDEX digest", pinned 2026-10-09.
 * - `v1.28.3` and `v1.28.2` (plain): one public file each.
 * - The project's own record, osscontainertools/kaniko hub-sync.md at
 *   426b5c11268ee24bfdbc486093119e3a798c0bf4 (the Docker Hub description of martizih/kaniko, whose
 *   images are `crane cp` copies of the ghcr.io ones, images.yaml), lists index digests per tag
 *   but stops at v1.27.6 (2026-06-05), before v1.28.3's security fix (Azure tokens sent to
 *   lookalike hosts).
 * A release manager with registry access settles it: if the plain `v1.28.5` tag names
 * `738807f0…`, pin that instead.
 */
export const KANIKO_IMAGE =
  'ghcr.io/osscontainertools/kaniko:v1.28.5-debug@sha256:d6d74217dc077acfd3094992e917c357080a2d3fdd1042a49e34e29a7e57c572';

/**
 * git and a POSIX shell, for the `source` init container: alpine/git, which publishes a tag per
 * git release (`2.54.0` and `v2.54.0` name the same image).
 * Sources: xonovex/platform packages/agent/agent-operator-go/internal/controller/
 * agentworkspace_controller.go at d5403ee32987b16e39ca5eb0e6f24b0ed0353ffb pins this string as
 * "the multi-architecture OCI index for alpine/git 2.54.0"; public files of three other projects
 * pin the same digest (a Dockerfile, as `v2.54.0`; a Python settings module; a PowerShell script,
 * by digest alone).
 */
export const GIT_IMAGE =
  'alpine/git:2.54.0@sha256:697cb1c85aefc5724febaec2202a974e0d66f6abb6be91a9a86d0c8757af692a';

/**
 * Rootless BuildKit v0.33.1 (tagged 2026-09-30), for buildx builds (`buildctl-daemonless.sh`).
 * Sources: otterdeploy/otterdeploy apps/builder/src/build-sandbox.ts at
 * 0747f41657132b31e7e8923575d863525413e0c1 pins this string as "the multi-arch index digest";
 * public files of three other projects pin the same string.
 */
export const BUILDKIT_IMAGE =
  'moby/buildkit:v0.33.1-rootless@sha256:f8a833b2de9d68e27f0815e4a737abdfaf8a2e4c615650557df11025101557b4';

/**
 * Packer 1.16.1, the newest release any public source pins (HashiCorp's official image, whose
 * Dockerfile sets `ENTRYPOINT ["/bin/packer"]`). packer.ts runs it.
 * Sources: two unrelated public Dockerfiles pin this string: a packer + upctl image laid out as
 * rwunderer/packer-upctl's Dockerfile is (a Renovate bump from the 1.16.0 pin of its commit
 * e566db14d6857bd43a0842380d478eb18092cbc8), and a terraform/packer/alpine tools image.
 */
export const PACKER_IMAGE =
  'hashicorp/packer:1.16.1@sha256:9fd66d5a4ea0598036e6b50ac6f8c0e72c27746648a5abe480463119e9486ea7';

/**
 * Builder images by builder name. The `container` method builds with kaniko too; paketo runs the
 * builder image the build names, so it has none here.
 */
export const BUILDER_IMAGES = { kaniko: KANIKO_IMAGE, buildkit: BUILDKIT_IMAGE } as const;

export type BuilderName = keyof typeof BUILDER_IMAGES;

/*
 * The SBOM and scan steps' images (docs/adr/0019-build-steps-and-artifacts.md). Each runs kiln's
 * constant step script, so each needs a shell (steps.ts STEP_SHELLS).
 *
 * Not pinned, because no public file pins an image of theirs that has a shell: grype (its
 * `-debug` images are never pinned by digest; the plain image is FROM scratch) and clair (only a
 * 2021 4.2.0 pin). A build that names one is told the step is skipped until the operator sets
 * KILN_STEP_IMAGE_GRYPE / KILN_STEP_IMAGE_CLAIR.
 *
 * Nor snyk: Snyk publishes only moving tags (`snyk/snyk:linux`, rebuilt with each CLI release;
 * snyk/snyk-images .github/workflows/stable.yml at f1ae338917d70ad275a886131267ea81c9011886
 * pushes `snyk/snyk:<variant>` and nothing else), and its versioned `snyk/snyk-cli` images are
 * deprecated. A digest of a moving tag says nothing about which CLI it holds, and the newest
 * public record of one is from August 2025. Snyk already needs the operator (its token,
 * KILN_SNYK_TOKEN_SECRET): the operator who turns it on also sets KILN_STEP_IMAGE_SNYK to the
 * `snyk/snyk:linux@sha256:…` they resolved (docs/adr/0032-image-pins.md).
 */

/**
 * syft, the distroless `-debug` variant (busybox under /busybox, binary /syft, uid 65532).
 * NOT CURRENT: v1.44.0 is ten minor releases behind v1.54.1, the newest release public sources
 * name (2026-10). No public source pins a `-debug` tag after v1.44.0 by digest (v1.45.1-debug,
 * v1.48.0-debug and v1.54.1-debug are named without one), and no release page seen prints image
 * digests. v1.54.1 is pinned (`3eb5379b…`) by public files of three unrelated projects, but only
 * as the plain image, FROM scratch without the shell the SBOM step's script needs (steps.ts
 * STEP_SHELLS). No other image carrying syft and a shell has a public versioned pin (Chainguard's
 * serves only `latest`).
 * Source (one): Dever502/suppsystem .github/workflows/ci.yml at
 * 93ba98c111a160ecfd92fee72a58025d4fa7bef5 (pinned there since its first commit, 2026-07-15).
 */
const SYFT_IMAGE =
  'anchore/syft:v1.44.0-debug@sha256:6dd8fb28e1b799e7cadaff6be2ec6d555757c4eeec0c0e48162f20b042ffa1ff';

/**
 * trivy 0.75.0 (alpine, /bin/sh), after the March 2026 compromise of 0.69.4–0.69.6 (CVE-2026-33634,
 * GHSA-69fq-xp46-6x23: malicious releases, and `latest` tags pointing at them). Sources: nine
 * public files (Makefiles, CI and release scripts), by their content from different projects, pin
 * this exact string; the code search that found them (2026-11-27) does not name their repositories.
 */
const TRIVY_IMAGE =
  'aquasec/trivy:0.75.0@sha256:af6acf9a6b85dfe389a1941505c0ce9efef52a4719635e1a962f022a3d855daa';

/** SBOM tools' images, by tool; a tool without one is skipped with a note. */
export const SBOM_TOOL_IMAGES: Readonly<Partial<Record<'syft' | 'grype' | 'trivy', string>>> = {
  syft: SYFT_IMAGE,
  trivy: TRIVY_IMAGE,
};

/** Scanners' images, by tool; a tool without one is skipped with a note. */
export const SCAN_TOOL_IMAGES: Readonly<
  Partial<Record<'trivy' | 'clair' | 'grype' | 'snyk', string>>
> = {
  trivy: TRIVY_IMAGE,
};

const PINNED = /^[^\s@]+@sha256:[0-9a-f]{64}$/;

/** True when `image` names its content by a sha256 digest (`name[:tag]@sha256:<64 hex>`). */
export function isPinnedByDigest(image: string): boolean {
  return PINNED.test(image);
}
