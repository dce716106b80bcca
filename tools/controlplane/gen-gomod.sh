#!/usr/bin/env bash
# Regenerates the wrapper modules' go.mod/go.sum (run only when bumping versions).
# usage: tools/controlplane/gen-gomod.sh v1.37.2 v3.6.16
set -euo pipefail
K8S=${1:?usage: $0 K8S_VERSION ETCD_VERSION}; ETCD=${2:?usage: $0 K8S_VERSION ETCD_VERSION}
STAGING=v0.${K8S#v1.}   # staging modules are tagged v0.<minor>.<patch>
root=$(cd "$(dirname "$0")" && pwd)
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOMODCACHE=${GOMODCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeloop/go/mod}

mkdir -p "$root/k8s" && cd "$root/k8s" && rm -f go.mod go.sum
go mod init kubeloop.invalid/controlplane/k8s >/dev/null 2>&1
go mod edit -go=1.26.0
# k8s.io/kubernetes requires its staging modules at v0.0.0 and resolves them with
# local replaces that a consuming module ignores; pin each one to its published tag.
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
mods=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod")
[ -n "$mods" ] || { echo "no v0.0.0 staging requirements in $gomod" >&2; exit 1; }
for m in $mods; do go mod edit -replace="$m=$m@$STAGING"; done
go mod edit -require="k8s.io/kubernetes@$K8S"
for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do go mod edit -tool="k8s.io/kubernetes/cmd/$c"; done
go mod tidy
echo "pinned $(echo "$mods" | wc -l) staging modules at $STAGING"

mkdir -p "$root/etcd" && cd "$root/etcd" && rm -f go.mod go.sum
go mod init kubeloop.invalid/controlplane/etcd >/dev/null 2>&1
go mod edit -go=1.26.0
go get -tool "go.etcd.io/etcd/server/v3@$ETCD" "go.etcd.io/etcd/etcdctl/v3@$ETCD"
go mod tidy
