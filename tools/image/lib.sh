# Sourced by tools/image/*.sh: the container store under ~/.cache/kubeloop and how to run
# containers on this kind of machine.
#
#   store          podman/buildah flags selecting our own store (not the system's)
#   runtime        the OCI runtime to use (runc; see below)
#   runtime_limits --ulimit flags within this process's own hard limits (see below)
#   image_tools T  install the missing tools T... from Debian's packages (as root), or say how

kubeloop_cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubeloop
image_cache=$kubeloop_cache/image
store_root=$kubeloop_cache/containers/storage
store_runroot=$kubeloop_cache/containers/run
store=(--root "$store_root" --runroot "$store_runroot" --storage-driver overlay)

# crun (podman's default) refuses a cgroup v1 host whose cgroup v2 hierarchy also has
# controllers ("cgroups in hybrid mode not supported"); runc runs there.
runtime=runc

# podman and buildah raise RLIMIT_NOFILE/NPROC to large defaults, which fails where the
# process lacks CAP_SYS_RESOURCE (setrlimit: operation not permitted); ask for no more than
# this process has. nproc: podman itself lowers its own to 32768.
_nofile=$(ulimit -Hn); [ "$_nofile" = unlimited ] && _nofile=1048576
_nproc=$(ulimit -Hu); { [ "$_nproc" = unlimited ] || [ "$_nproc" -gt 32768 ]; } && _nproc=32768
runtime_limits=(--ulimit "nofile=$_nofile:$_nofile" --ulimit "nproc=$_nproc:$_nproc")

image_tools() {
  local missing=() tool
  for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]} from Debian's packages" >&2
    apt-get install -y -q "${missing[@]}" >&2 \
      || { apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2; }
  else
    echo "$(basename "$0"): needs ${missing[*]}: apt-get install ${missing[*]} (as root)" >&2
    exit 1
  fi
}
