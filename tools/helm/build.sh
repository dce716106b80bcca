#!/usr/bin/env bash
# Builds (or reuses) helm from the Go module proxy, for the chart tests
# (tests/integration/test_chart.py): `helm lint` and `helm template` of charts/nodepool-operator.
# Built once and cached under ~/.cache/kubeloop like promtool (tools/monitoring/build.sh).
# Prints the directory holding the binary on stdout.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../controlplane/build-lib.sh"
helm_version=v3.22.0
build_env
# a newer helm may ask for a newer Go than the machine has; auto fetches it through the proxy
export GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
out=$kubeloop_cache/helm/helm-${helm_version}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
build_begin "$out" "helm"
echo "building helm $helm_version (log: $log); a few minutes on 2 cores" >&2
# As helm's Makefile: the version `helm version` reports, and the Kubernetes version that
# `helm template` and `helm lint` assume (default capabilities, deprecation checks), which is
# the client-go minor helm is built with; without them it assumes v1.20 and refuses charts
# that need a newer one.
client_go=$(go mod download -json "helm.sh/helm/v3@$helm_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' \
            | xargs sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p')
[ -n "$client_go" ] || { echo "tools/helm/build.sh: cannot read helm's client-go version" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$client_go"
done
step helm "$tmp" env GOBIN="$tmp" go install -trimpath -ldflags="$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$helm_version"
"$tmp/helm" version --short >&2
build_finish
