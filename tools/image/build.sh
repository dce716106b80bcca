#!/usr/bin/env bash
# Builds the operator image from the Dockerfile with buildah, where there is no Docker engine
# and no container registry: `make image` (and the image test, tests/e2e/test_image.py) call this.
#
# The Dockerfile's default base (python:3.11-slim-bookworm) lives in a registry; here the base
# is a Debian bookworm root filesystem with Debian's python3 (3.11), made by mmdebstrap from
# Debian's packages and imported as a local image, handed over as the PYTHON_IMAGE build
# argument. Everything is cached under ~/.cache/kubeloop: the base tarball (keyed by what goes
# into it) and a container store of our own (base image, build layers, the image), so a second
# run only redoes the layers whose inputs changed.
#
# Usage: tools/image/build.sh [IMAGE]   (default nodepool-operator:dev)
# Prints, on stdout, key=value lines the image test reads: image, root and runroot (the store),
# runtime and ulimits (how to run it here, see lib.sh), size (bytes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
image=${1:-nodepool-operator:dev}
[[ $image == */* ]] || image=localhost/$image

image_tools buildah podman mmdebstrap runc

# -- the base: Debian bookworm + python3, keyed by everything that decides its contents -------
suite=bookworm
packages=python3,python3-venv,ca-certificates  # venv: the Dockerfile puts uv in one (PEP 668)
mirrors=(
  "deb http://deb.debian.org/debian $suite main"
  "deb http://deb.debian.org/debian $suite-updates main"
  "deb http://deb.debian.org/debian-security $suite-security main"
)
debstrap_opts=(
  --variant=essential "--include=$packages"
  # merged /usr without the usrmerge package (which would pull in perl)
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --aptopt='APT::Install-Recommends "false"'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*'
)
key=$(printf '%s\n' "$suite" "${debstrap_opts[@]}" "${mirrors[@]}" | sha256sum | cut -c1-12)
base_tar=$image_cache/base-$suite-$key.tar
base_image=localhost/kubeloop-python:$suite-$key
base_part=$image_cache/base-$suite-$key.part.tar  # mmdebstrap picks the format by the suffix
mkdir -p "$image_cache"
if [ ! -f "$base_tar" ]; then
  echo "building the base ($suite, $packages) with mmdebstrap (log: $base_tar.log)" >&2
  t0=$SECONDS
  if ! mmdebstrap "${debstrap_opts[@]}" "$suite" "$base_part" "${mirrors[@]}" >"$base_tar.log" 2>&1
  then
    echo "tools/image/build.sh: mmdebstrap failed:" >&2; tail -n 20 "$base_tar.log" >&2
    rm -f "$base_part"; exit 1
  fi
  mv "$base_part" "$base_tar"
  echo "  base built in $((SECONDS - t0))s" >&2
fi
if ! podman "${store[@]}" image exists "$base_image"; then
  # the official python image's environment, which the Dockerfile's PATH line extends
  podman "${store[@]}" import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    "$base_tar" "$base_image" >/dev/null
fi

# -- the image: the Dockerfile as it is ---------------------------------------------------------
# The RUN steps reach PyPI through the host's network and trust store (a proxy's CA included):
# the host's CA bundle is mounted over the base's, and a system uv.toml tells uv to use it (uv
# otherwise carries its own roots). The host's uv cache makes the dependency layer quick; none
# of these mounts ends up in a layer, and the runtime stage runs nothing.
ca_bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
uv_toml=$image_cache/uv.toml
echo 'system-certs = true' >"$uv_toml"
uv_cache=${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uv}
mkdir -p "$uv_cache"
t0=$SECONDS
if ! buildah "${store[@]}" build --layers --pull=never --network=host \
    --runtime="$runtime" "${runtime_limits[@]}" \
    --volume "$ca_bundle:/etc/ssl/certs/ca-certificates.crt:ro" \
    --volume "$uv_toml:/etc/uv/uv.toml:ro" \
    --volume "$uv_cache:/root/.cache/uv" \
    --build-arg "PYTHON_IMAGE=$base_image" \
    --tag "$image" --file "$repo/Dockerfile" "$repo" >"$image_cache/build.log" 2>&1; then
  echo "tools/image/build.sh: buildah build failed (log: $image_cache/build.log):" >&2
  tail -n 30 "$image_cache/build.log" >&2
  exit 1
fi
# Each source change leaves the previous build's untagged images behind (about 100 MB); drop
# those older than an hour. The current build's cache is in use or recent, and a layer another
# image still stands on is not dangling, so the dependency layers stay.
podman "${store[@]}" image prune -f --filter until=1h >/dev/null
size=$(podman "${store[@]}" image inspect --format '{{.Size}}' "$image")
echo "built $image in $((SECONDS - t0))s: $((size / 1000000)) MB (base $base_image)" >&2
echo "image=$image"
echo "root=$store_root"
echo "runroot=$store_runroot"
echo "runtime=$runtime"
echo "ulimits=${runtime_limits[*]}"
echo "size=$size"
