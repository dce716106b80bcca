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
export GOTOOLCHAIN=auto GOFLAGS=-mod=mod CGO_ENABLED=0
base=${XDG_CACHE_HOME:-$HOME/.cache}/kubeloop
export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$base/go/mod} GOCACHE=${GOCACHE_OVERRIDE:-$base/go/build}

version=$(awk '$1=="sigs.k8s.io/karpenter" && $2 ~ /^v/ {print $2}' "$root/go.mod" | head -1)
[ -n "$version" ] || { echo "build.sh: cannot read the Karpenter version from $root/go.mod" >&2; exit 1; }
out=${KUBELOOP_KARPENTER_CACHE:-$base/karpenter}/$version
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

command -v go >/dev/null || { echo "build.sh: Go is needed to build Karpenter (apt-get install golang or put go on PATH)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
log="$out.log"; : > "$log"
tmp=$(mktemp -d "$out.tmp.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
echo "building Karpenter $version (kwok provider) into $out (log: $log); takes ~4 min on 2 cores" >&2

step() {  # step NAME CMD...: runs one build step in $root, reports it, names it on failure
  local name=$1; shift
  local t0=$SECONDS
  echo "  [$(date +%H:%M:%S)] $name ..." >&2
  echo "=== $name: (cd $root && $*)" >>"$log"
  if ! (cd "$root" && "$@") >>"$log" 2>&1; then
    echo "build.sh: step '$name' failed: (cd $root && $*)" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  echo "  [$(date +%H:%M:%S)] $name done in $((SECONDS - t0))s" >&2
}

step "download modules" go mod download
step "karpenter-kwok" go build -trimpath -ldflags="-s -w" -o "$tmp/karpenter-kwok" sigs.k8s.io/karpenter/kwok
src=$(cd "$root" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
mkdir -p "$tmp/crds"
cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$tmp/crds/"
chmod -R u+w "$tmp/crds"
touch "$tmp/.complete"
rm -rf "$out"; mv "$tmp" "$out"; trap - EXIT
echo "$out"
