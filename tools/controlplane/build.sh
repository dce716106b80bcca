#!/usr/bin/env bash
# Builds (or reuses) kube-apiserver, kube-scheduler, kubectl, etcd and etcdctl from the
# Go module proxy. Prints the directory holding them on stdout; progress goes to stderr
# and the full log to $out.log. A finished build is marked by .complete, so an
# interrupted one is never mistaken for a good one.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
base=${XDG_CACHE_HOME:-$HOME/.cache}/kubeloop
export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$base/go/mod} GOCACHE=${GOCACHE_OVERRIDE:-$base/go/build}

k8s_version=$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$root/k8s/go.mod" | head -1)
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2}' "$root/etcd/go.mod" | head -1)
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] || { echo "build.sh: cannot read versions from go.mod" >&2; exit 1; }
out=${KUBELOOP_CONTROLPLANE_CACHE:-$base/controlplane}/$k8s_version-etcd${etcd_version#v}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

command -v go >/dev/null || { echo "build.sh: Go is needed to build the control plane (apt-get install golang or put go on PATH)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
log="$out.log"; : > "$log"
tmp=$(mktemp -d "$out.tmp.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
echo "building control plane $k8s_version + etcd $etcd_version into $out (log: $log); first build takes 15-30 min on 2 cores" >&2

step() {  # step NAME DIR CMD...: runs one build step, reports it, names it on failure
  local name=$1 dir=$2; shift 2
  local t0=$SECONDS
  echo "  [$(date +%H:%M:%S)] $name ..." >&2
  echo "=== $name: (cd $dir && $*)" >>"$log"
  if ! (cd "$dir" && "$@") >>"$log" 2>&1; then
    echo "build.sh: step '$name' failed: (cd $dir && $*)" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  echo "  [$(date +%H:%M:%S)] $name done in $((SECONDS - t0))s" >&2
}

minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for kv in "gitVersion=$k8s_version" gitMajor=1 "gitMinor=$minor" gitTreeState=clean \
          "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  ldflags+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
tags=selinux,notest,grpcnotrace
step "download k8s modules" "$root/k8s" go mod download
step "download etcd modules" "$root/etcd" go mod download
step "etcd" "$root/etcd" go build -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
step "etcdctl" "$root/etcd" go build -trimpath -ldflags="-s -w" -o "$tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3
for c in kube-apiserver kube-scheduler kubectl; do
  step "$c" "$root/k8s" go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c"
done
"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version | head -1 >&2
touch "$tmp/.complete"
rm -rf "$out"; mv "$tmp" "$out"; trap - EXIT
echo "$out"
