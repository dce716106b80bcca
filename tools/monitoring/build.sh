#!/usr/bin/env bash
# Builds (or reuses) promtool and fetches the Prometheus Operator's CRDs, both from the Go
# module proxy, for the deploy test (tests/integration/test_deploy.py): promtool parses the
# alert rules and the dashboard's PromQL; the CRDs let the apiserver dry-run the ServiceMonitor
# and PrometheusRule of config/default. Prints the directory holding them on stdout.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../controlplane/build-lib.sh"
prometheus_version=v0.316.0
operator_version=v0.85.0
build_env
# prometheus asks for a newer Go than some machines have; auto fetches it through the proxy
export GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
out=$kubeloop_cache/monitoring/prometheus-${prometheus_version}-operator-${operator_version}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
build_begin "$out" "promtool"
echo "building promtool $prometheus_version (log: $log); a few minutes on 2 cores" >&2
# remove_all_sd: promtool needs the parser and rule checker, not 30 service discoveries
# (which would pull in every cloud SDK they use)
step promtool "$tmp" env GOBIN="$tmp" go install -trimpath -tags=remove_all_sd -ldflags="-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@$prometheus_version"
dir=$(module_dir "github.com/prometheus-operator/prometheus-operator@$operator_version")
for crd in servicemonitors prometheusrules; do
  cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$crd.yaml" "$tmp/"
done
chmod u+w "$tmp"/*.yaml
"$tmp/promtool" --version | sed -n 1p >&2  # sed reads it all: head could SIGPIPE it under pipefail
build_finish
