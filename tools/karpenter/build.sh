#!/usr/bin/env bash
# Builds (or reuses) Karpenter's kwok cloud provider (`sigs.k8s.io/karpenter/kwok`) from the
# Go module proxy, at the version pinned in tools/karpenter/go.mod, and copies Karpenter's
# CRDs next to it. Prints the directory on stdout; progress goes to stderr and the full log
# to $out.log. A finished build is marked by .complete, so an interrupted one is never
# mistaken for a good one. Karpenter asks for a newer Go than the machine's, so this build
# (unlike the control plane's) lets the go command fetch the toolchain it names
# (GOTOOLCHAIN=auto, through the same module proxy).
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
. "$root/../controlplane/build-lib.sh"
export GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
build_env

version=$(awk '$1=="sigs.k8s.io/karpenter" && $2 ~ /^v/ {print $2; exit}' "$root/go.mod")
[ -n "$version" ] || { echo "build.sh: cannot read the Karpenter version from $root/go.mod" >&2; exit 1; }
out=${KUBELOOP_KARPENTER_CACHE:-$kubeloop_cache/karpenter}/$version
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

build_begin "$out" "Karpenter"
echo "building Karpenter $version (kwok provider) into $out (log: $log); takes ~4 min on 2 cores" >&2

step "download modules" "$root" go mod download
step "karpenter-kwok" "$root" go build -trimpath -ldflags="-s -w" -o "$tmp/karpenter-kwok" sigs.k8s.io/karpenter/kwok
src=$(cd "$root" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
mkdir -p "$tmp/crds"
cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$tmp/crds/"
chmod -R u+w "$tmp/crds"
build_finish
