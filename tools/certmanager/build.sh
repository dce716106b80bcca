#!/usr/bin/env bash
# Fetches (or reuses) cert-manager's Certificate and Issuer CRDs from its Go module (the
# module proxy, as tools/monitoring/build.sh fetches the Prometheus Operator's), so the deploy
# and chart tests (tests/integration/test_deploy.py, test_chart.py, test_webhook_manifests.py)
# have the apiserver check config/certmanager's objects against cert-manager's real schema.
# Nothing is built: two YAML files (about 400 kB) are copied out of the module. Prints the
# directory holding them on stdout.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../controlplane/build-lib.sh"
cert_manager_version=v1.21.2
build_env
export GOFLAGS=-mod=mod
out=$kubeloop_cache/certmanager/cert-manager-${cert_manager_version}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
build_begin "$out" "cert-manager's CRDs"
echo "fetching cert-manager $cert_manager_version's CRDs (log: $log)" >&2
dir=$(module_dir "github.com/cert-manager/cert-manager@$cert_manager_version")
# deploy/crds holds controller-gen's output, plain YAML (the release's Helm chart templates it)
for crd in certificates issuers; do
  cp "$dir/deploy/crds/cert-manager.io_$crd.yaml" "$tmp/"
done
chmod u+w "$tmp"/*.yaml
build_finish
