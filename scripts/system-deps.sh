#!/usr/bin/env bash
# Installs the system packages kiln's local runner and its tests need, when they are missing:
# buildah (builds), docker-registry (the local registry tests push to), busybox-static (a base
# image made in tests without pulling), git (sources), unzip (scripts/kube-tools.sh unpacks kubectl
# and helm), Chromium with a font (the web console's browser tests drive it through
# playwright-core), skopeo (`make verify-pins`, and the tests of it against the local registry),
# packer (Debian's 1.6.6: the local runner's packer builds, and their test), and curl (the README's
# commands, and the test that runs its quick start).
# As root on Debian it runs apt-get; otherwise it prints the exact command and fails.
set -euo pipefail

declare -A PACKAGE_FOR=(
  [buildah]=buildah
  [docker-registry]=docker-registry
  [git]=git
  [chromium]=chromium
  [skopeo]=skopeo
  [unzip]=unzip
  [packer]=packer
  [curl]=curl
)
missing=()
for command in "${!PACKAGE_FOR[@]}"; do
  command -v "$command" >/dev/null 2>&1 || missing+=("${PACKAGE_FOR[$command]}")
done
[[ -x /bin/busybox ]] || missing+=(busybox-static)
[[ -d /usr/share/fonts/truetype/dejavu ]] || missing+=(fonts-dejavu-core)
if ((${#missing[@]} == 0)); then
  exit 0
fi

command_line="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "kiln needs: ${missing[*]}" >&2
  echo "install them with: sudo apt-get update && sudo ${command_line}" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends ${missing[*]} >/dev/null
