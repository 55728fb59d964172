#!/usr/bin/env bash
# Checks every image pin kiln runs or ships against its registry (docs/adr/0032-image-pins.md):
# for each `name:tag@sha256:<digest>` in src/ (TypeScript, specs aside), the Dockerfile, the chart,
# the samples and the CRDs, it asks where the tag points now and compares. The release manager runs
# it (`make verify-pins`) before each release; Renovate proposes the bumps between releases.
#
#   scripts/verify-pins.sh          check each pin once; exit 1 when a tag moved or cannot be read
#   scripts/verify-pins.sh --list   print "<file><TAB><pin>" per pin and exit (no network; also
#                                   VERIFY_PINS_LIST=1)
#
# Without registry access it says that it checked nothing and exits 0: nothing is known about the
# pins then, and a machine without a network is not a reason to fail. Environment:
#   VERIFY_PINS_PROBE       a URL whose answer, any HTTP status, means registries are reachable
#                           (default https://registry-1.docker.io/v2/); asked once, 5 s at most
#   VERIFY_PINS_ROOT        the tree whose pins are read (default: this repository)
#   VERIFY_PINS_TLS_VERIFY  false for a registry over plain HTTP, such as a test's (default true)
# skopeo (Debian's package) reads the manifests; as root on Debian it is installed when missing.
set -euo pipefail

list=${VERIFY_PINS_LIST:-}
case "${1:-}" in
  --list) list=1 ;;
  '') ;;
  *)
    echo "usage: $0 [--list]" >&2
    exit 2
    ;;
esac
probe=${VERIFY_PINS_PROBE:-https://registry-1.docker.io/v2/}
tls_verify=${VERIFY_PINS_TLS_VERIFY:-true}
cd "${VERIFY_PINS_ROOT:-$(dirname "${BASH_SOURCE[0]}")/..}"

# name[:port]/path:tag@sha256:<64 hex>, as Renovate's managers in renovate.json read them.
PIN='[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9._-]+)*:[A-Za-z0-9_][A-Za-z0-9._-]*@sha256:[0-9a-f]{64}'

pin_files() {
  local dir file
  {
    if [[ -d src ]]; then
      find src -type f \( -name '*.ts' -o -name '*.tsx' \) ! -name '*.spec.ts'
    fi
    for file in Dockerfile charts/kiln/values.yaml; do
      if [[ -f $file ]]; then echo "$file"; fi
    done
    for dir in charts/kiln/templates config/samples crds; do
      if [[ -d $dir ]]; then find "$dir" -type f -name '*.yaml'; fi
    done
  } | LC_ALL=C sort
}

# "<file>\t<pin>", each pin once per file (no file name holds a colon).
pins() {
  pin_files | { xargs -r -d '\n' grep -oHE "$PIN" || true; } | sed 's/:/\t/' | LC_ALL=C sort -u
}

if [[ -n $list ]]; then
  pins
  exit 0
fi

reachable() {
  if command -v curl >/dev/null 2>&1; then
    curl --silent --output /dev/null --max-time 5 "$probe"
  else
    local hostport=${probe#*://}
    hostport=${hostport%%/*}
    local port=443
    [[ $probe == http://* ]] && port=80
    [[ $hostport == *:* ]] && port=${hostport##*:}
    timeout 5 bash -c "exec 3<>/dev/tcp/${hostport%:*}/$port" 2>/dev/null
  fi
}

mapfile -t found < <(pins)
if ((${#found[@]} == 0)); then
  echo "verify-pins: no pins found under $(pwd): checked nothing"
  exit 0
fi
if ! reachable; then
  echo "verify-pins: no registry access ($probe did not answer): checked nothing (${#found[@]} pins)"
  exit 0
fi

if ! command -v skopeo >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "verify-pins needs skopeo" >&2
    echo "install it with: sudo apt-get update && sudo apt-get install -y --no-install-recommends skopeo" >&2
    exit 1
  fi
  echo "installing skopeo" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends skopeo >/dev/null
fi

manifest=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$manifest" "$errors"' EXIT

checked=0 moved=0 unreadable=0
while IFS= read -r pin; do
  checked=$((checked + 1))
  reference=${pin%@*}
  pinned=${pin##*@}
  files=$(printf '%s\n' "${found[@]}" | awk -F '\t' -v pin="$pin" '$2 == pin { print $1 }' | paste -sd ' ')
  # The bytes of the manifest the tag names: their sha256 is the digest a pull by tag would use.
  if ! skopeo inspect --raw --retry-times 2 --tls-verify="$tls_verify" "docker://$reference" \
    >"$manifest" 2>"$errors"; then
    unreadable=$((unreadable + 1))
    echo "error  $pin: $(grep -m1 . "$errors" || echo 'skopeo failed') (in $files)"
    continue
  fi
  current="sha256:$(sha256sum "$manifest" | cut -d ' ' -f 1)"
  if [[ $current == "$pinned" ]]; then
    echo "ok     $pin"
  else
    moved=$((moved + 1))
    echo "moved  $pin: the tag names $current now (in $files)"
  fi
done < <(printf '%s\n' "${found[@]}" | cut -f 2 | LC_ALL=C sort -u)

echo "verify-pins: $checked pins checked, $moved moved, $unreadable unreadable"
[[ $moved -eq 0 && $unreadable -eq 0 ]]
