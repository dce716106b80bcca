# Sourced by the tools/*/build*.sh scripts: the one cache layout, step runner and "finished
# build" marker that every from-source build here shares. It lives in tools/controlplane
# because the kubeloop wheel ships that directory (envtest builds from it).
#
#   build_env                  GOMODCACHE/GOCACHE under ~/.cache/kubeloop (overridable)
#   build_begin OUT WHAT       log to OUT.log, build into a temp dir ($tmp) removed on failure
#   step NAME DIR CMD...       run one step in DIR, log it, name it (and show the log) on failure
#   build_finish               mark $tmp complete, move it to OUT, print OUT
#   k8s_ldflags VERSION        the -X version flags kubectl and the servers report
#   module_dir MODULE@VERSION  download a Go module through the proxy, print its directory
#
# A finished build is marked by .complete, so an interrupted one is never mistaken for a good
# one; callers check it before sourcing anything else.

kubeloop_cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubeloop

build_env() {
  export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$kubeloop_cache/go/mod}
  export GOCACHE=${GOCACHE_OVERRIDE:-$kubeloop_cache/go/build}
}

build_begin() {  # build_begin OUT WHAT
  build_out=$1
  build_name=$(basename "$0")
  command -v go >/dev/null || {
    echo "$build_name: Go >= 1.26 is needed to build $2: install it from https://go.dev/dl/ (distribution packages are often older) and put go on PATH" >&2
    exit 1
  }
  mkdir -p "$(dirname "$build_out")"
  log="$build_out.log"; : > "$log"
  tmp=$(mktemp -d "$build_out.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}

step() {  # step NAME DIR CMD...
  local name=$1 dir=$2; shift 2
  local t0=$SECONDS
  echo "  [$(date +%H:%M:%S)] $name ..." >&2
  echo "=== $name: (cd $dir && $*)" >>"$log"
  if ! (cd "$dir" && "$@") >>"$log" 2>&1; then
    echo "$build_name: step '$name' failed: (cd $dir && $*)" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  echo "  [$(date +%H:%M:%S)] $name done in $((SECONDS - t0))s" >&2
}

build_finish() {
  touch "$tmp/.complete"
  rm -rf "$build_out"; mv "$tmp" "$build_out"; trap - EXIT
  echo "$build_out"
}

k8s_ldflags() {  # k8s_ldflags VERSION
  local minor=${1#v1.} flags="-s -w" kv
  minor=${minor%%.*}
  for kv in "gitVersion=$1" gitMajor=1 "gitMinor=$minor" gitTreeState=clean \
            "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
    flags+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  echo "$flags"
}

module_dir() {  # module_dir MODULE@VERSION
  local dir
  dir=$(go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -n "$dir" ] || { echo "$(basename "$0"): cannot download the Go module $1" >&2; return 1; }
  echo "$dir"
}
