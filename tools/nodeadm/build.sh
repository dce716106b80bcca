#!/usr/bin/env bash
# Builds (or reuses) nodeadm, the AL2023 node bootstrapper of awslabs/amazon-eks-ami, from the Go
# module proxy. The tests run its offline `nodeadm config check` on every user data the operator
# generates for an AL2023 node class, so the NodeConfig we write is judged by the program a real
# AMI runs, not by a reading of our own. Prints the directory holding bin/nodeadm on stdout.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../controlplane/build-lib.sh"
# The repository has only date tags, so the module is consumed by pseudo-version (as Karpenter's
# AWS provider does); this one is what the proxy answers for @latest.
nodeadm_version=v0.0.0-20240229193347-cfab22a10647
build_env
export GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
out=$kubeloop_cache/nodeadm/nodeadm-${nodeadm_version}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
build_begin "$out" "nodeadm"
echo "building nodeadm $nodeadm_version (log: $log); a minute or two on 2 cores" >&2
mkdir -p "$tmp/bin"
step nodeadm "$tmp" env GOBIN="$tmp/bin" go install -trimpath -ldflags="-s -w" \
  "github.com/awslabs/amazon-eks-ami/nodeadm/cmd/nodeadm@$nodeadm_version"
"$tmp/bin/nodeadm" --help >/dev/null 2>&1
build_finish
