import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The vulnerability the fake trivy always reports: HIGH, in busybox, with no fix. */
export const FAKE_FINDING = { id: 'CVE-2024-58251', package: 'busybox', severity: 'HIGH' } as const;

/**
 * Checks every fake step tool makes before it does anything: the image is a registry reference by
 * sha256 digest, and none of kiln's own variables reached it. Fails with exit 64 otherwise. Sets
 * `ref` and prints it, so a test can compare it with what the registry holds.
 */
const CHECK_REFERENCE = String.raw`
check_reference() {
  ref="$1"
  if ! printf '%s' "$ref" | grep -Eq '^[^/@]+(/[^/@]+)+@sha256:[0-9a-f]{64}$'; then
    echo "$0: '$ref' is not a registry reference by digest" >&2
    exit 64
  fi
  if env | grep -q '^KILN_'; then
    echo "$0: kiln's own variables reached a step tool" >&2
    exit 64
  fi
  echo "$(basename "$0"): looking at $ref" >&2
}
`;

/**
 * `syft scan registry:<ref> -o spdx-json=<file>` (and SYFT_REGISTRY_INSECURE_USE_HTTP for the
 * plain-HTTP test registry). Writes a fixed SPDX 2.3 document naming the image. For an image in a
 * repository whose name starts with `slow` it sleeps first (to be stopped); for one named
 * `refused` it writes a JSON document that is no SBOM.
 */
const SYFT = String.raw`#!/bin/sh
set -eu
${CHECK_REFERENCE}
[ "$1" = scan ] && [ "$3" = -o ] || { echo "fake syft: unexpected arguments: $*" >&2; exit 64; }
check_reference "${'$'}{2#registry:}"
out="${'$'}{4#spdx-json=}"
[ "${'$'}{SYFT_REGISTRY_INSECURE_USE_HTTP:-}" = true ] || { echo "fake syft: the registry needs SYFT_REGISTRY_INSECURE_USE_HTTP" >&2; exit 64; }
case "$ref" in
  */slow*@*) echo "fake syft: sleeping" >&2; sleep 300 ;;
  */refused@*) echo '{"hello": "not an SBOM"}' > "$out"; exit 0 ;;
esac
cat > "$out" <<EOF
{
  "spdxVersion": "SPDX-2.3",
  "dataLicense": "CC0-1.0",
  "SPDXID": "SPDXRef-DOCUMENT",
  "name": "$ref",
  "documentNamespace": "https://anchore.com/syft/image/fake-1",
  "creationInfo": { "created": "2026-11-23T10:00:00Z", "creators": ["Tool: syft-1.18.1"] },
  "packages": [
    {
      "name": "busybox",
      "SPDXID": "SPDXRef-Package-busybox",
      "versionInfo": "1.36.1",
      "downloadLocation": "NOASSERTION"
    }
  ]
}
EOF
`;

/**
 * `trivy image … --format json --output <file> --insecure <ref>`: writes a fixed trivy JSON report
 * with one finding (FAKE_FINDING). Other formats are refused.
 */
const TRIVY = String.raw`#!/bin/sh
set -eu
${CHECK_REFERENCE}
[ "$1" = image ] || { echo "fake trivy: unexpected arguments: $*" >&2; exit 64; }
shift
format='' out='' insecure=no ref=''
while [ $# -gt 0 ]; do
  case "$1" in
    --format) format="$2"; shift ;;
    --output) out="$2"; shift ;;
    --insecure) insecure=yes ;;
    --*) ;;
    *) ref="$1" ;;
  esac
  shift
done
[ "$format" = json ] || { echo "fake trivy: only --format json is faked, not '$format'" >&2; exit 64; }
[ "$insecure" = yes ] || { echo "fake trivy: the registry needs --insecure" >&2; exit 64; }
check_reference "$ref"
cat > "$out" <<EOF
{
  "SchemaVersion": 2,
  "ArtifactName": "$ref",
  "ArtifactType": "container_image",
  "Results": [
    {
      "Target": "$ref (busybox)",
      "Class": "lang-pkgs",
      "Type": "binary",
      "Vulnerabilities": [
        {
          "VulnerabilityID": "${FAKE_FINDING.id}",
          "PkgName": "${FAKE_FINDING.package}",
          "InstalledVersion": "1.36.1",
          "Severity": "${FAKE_FINDING.severity}",
          "Title": "busybox: a fixed finding of the fake trivy"
        }
      ]
    }
  ]
}
EOF
`;

/** `grype …` that cannot reach the registry: says so and exits 2, writing nothing. */
const GRYPE = `#!/bin/sh
echo "fake grype: failed to pull the image: connection reset by peer" >&2
exit 2
`;

/** A directory holding the fake `syft`, `trivy` and `grype`, to put first on kiln's PATH. */
export function fakeStepToolBin(): string {
  const dir = mkdtempSync('/dev/shm/kiln-fake-steps-');
  for (const [name, script] of [
    ['syft', SYFT],
    ['trivy', TRIVY],
    ['grype', GRYPE],
  ] as const) {
    writeFileSync(join(dir, name), script);
    chmodSync(join(dir, name), 0o755);
  }
  return dir;
}
