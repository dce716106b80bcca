#!/usr/bin/env bash
# Builds (or reuses) kube-apiserver, kube-scheduler, kubectl, etcd and etcdctl from the
# Go module proxy. Prints the directory holding them on stdout; progress goes to stderr
# and the full log to $out.log.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
. "$root/build-lib.sh"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
build_env

k8s_version=$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$root/k8s/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$root/etcd/go.mod")
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] || { echo "build.sh: cannot read versions from go.mod" >&2; exit 1; }
out=${KUBELOOP_CONTROLPLANE_CACHE:-$kubeloop_cache/controlplane}/$k8s_version-etcd${etcd_version#v}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

build_begin "$out" "the control plane"
echo "building control plane $k8s_version + etcd $etcd_version into $out (log: $log); first build takes 15-30 min on 2 cores" >&2
ldflags=$(k8s_ldflags "$k8s_version")
tags=selinux,notest,grpcnotrace
step "download k8s modules" "$root/k8s" go mod download
step "download etcd modules" "$root/etcd" go mod download
step "etcd" "$root/etcd" go build -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
step "etcdctl" "$root/etcd" go build -trimpath -ldflags="-s -w" -o "$tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3
for c in kube-apiserver kube-scheduler kubectl; do
  step "$c" "$root/k8s" go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c"
done
"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version | sed -n 1p >&2  # sed reads it all: head could SIGPIPE etcd under pipefail
build_finish
