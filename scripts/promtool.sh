#!/usr/bin/env bash
# Puts promtool, Prometheus's own rule checker, under .tools/prometheus/ for
# test/chart-observability.spec.ts (`promtool check rules` and `promtool test rules` on the chart's
# alerts). It is taken out of Debian's `prometheus` package with `apt-get download` and
# `dpkg-deb -x`, not installed with `apt-get install`: that package is the whole Prometheus server
# (96 MB installed, a web UI's JavaScript libraries), adds a system user, and enables and starts a
# prometheus service on port 9090, the port of kiln's own /metrics (docs/adr/0048-chart-monitoring.md).
# apt checks the package against the archive's signed index. Nothing goes on the system PATH.
# Does nothing when promtool is there. Without apt (not Debian) it says so and exits 0: the test
# then checks the rules with the PromQL parser only.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tools/prometheus
if [[ -x "$TOOLS/promtool" ]] && "$TOOLS/promtool" --version >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "promtool: no apt-get here; the chart's alert rules are checked by the PromQL parser only" >&2
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download() { (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); }
if ! download; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "promtool: apt-get download prometheus failed; run 'sudo apt-get update' and try again" >&2
    exit 1
  fi
  apt-get update -qq
  download
fi
dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
mkdir -p "$TOOLS"
install -m 0755 "$work/root/usr/bin/promtool" "$TOOLS/promtool"
echo "promtool: $("$TOOLS/promtool" --version 2>&1 | head -1) in $TOOLS" >&2
