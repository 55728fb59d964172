#!/usr/bin/env bash
# `make test-cluster`: the suites that can target any cluster, run against the one KUBECONFIG
# names (docs/development.md, "make test-cluster and the kind workflow"). Every other operator
# suite stays on the API server double whatever KUBECONFIG says (noteDoubleOnly).
#   scripts/test-cluster.sh --check   only checks KUBECONFIG (make runs it before installing anything)
#   scripts/test-cluster.sh [ARGS]    checks, asks the cluster for its version, runs jest [ARGS]
# The suites read KILN_TEST_REGISTRY (where their builds push), KILN_TEST_GIT_REPOSITORY (what
# they clone) and KILN_TEST_NAMESPACE.
set -euo pipefail

# The suites that reach KUBECONFIG's cluster, one place: test/cluster-workflow.spec.ts fails when
# a suite of test/ reads KUBECONFIG or calls clusterTarget() and is not listed here.
SUITES=(test/crd.spec.ts test/operator-cluster.spec.ts)

fail() {
  echo "make test-cluster: $*" >&2
  exit 2
}

kubeconfig=${KUBECONFIG:-}
if [[ -z ${kubeconfig//[[:space:]]/} ]]; then
  # shellcheck disable=SC2016 # the message shows the variable, unexpanded
  fail 'KUBECONFIG is not set. Set it to the kubeconfig file of the cluster to test, e.g.' \
    'KUBECONFIG=$HOME/.kube/config make test-cluster (docs/development.md).'
fi
if [[ $kubeconfig == *:* ]]; then
  fail "KUBECONFIG=$kubeconfig lists several files; the suites read one kubeconfig file."
fi
if [[ ! -f $kubeconfig ]]; then
  fail "KUBECONFIG=$kubeconfig names no file."
fi
# Resolved before the cd below: a relative KUBECONFIG is relative to where make was started.
KUBECONFIG=$(realpath "$kubeconfig")
export KUBECONFIG
[[ ${1:-} == --check ]] && exit 0

cd "$(dirname "$0")/.."
kubectl=.tools/kube/kubectl
[[ -x $kubectl ]] || fail "$kubectl is missing: run make kube-tools."
if ! version=$("$kubectl" --request-timeout=20s version -o json 2>&1); then
  fail "the cluster of KUBECONFIG=$KUBECONFIG does not answer: $version"
fi
server=$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).serverVersion.gitVersion)' \
  "$version")
context=$("$kubectl" config current-context 2>/dev/null || echo '(none)')
echo "make test-cluster: context $context, Kubernetes $server;" \
  "builds push to ${KILN_TEST_REGISTRY:-registry.example.com (KILN_TEST_REGISTRY unset)}" >&2

# One suite at a time: both apply the CRD, and their builds share the cluster's capacity. A real
# cluster pulls the builder images first and the suites wait up to 10 minutes for a build, past
# jest's default 30 s.
exec npx --no-install jest --ci --runInBand --testTimeout=900000 --runTestsByPath "${SUITES[@]}" "$@"
