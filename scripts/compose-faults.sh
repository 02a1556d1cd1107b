#!/usr/bin/env bash
# scripts/compose-faults.sh [ROWS]: the fault rows across hosts, then
# RELIABILITY.md's "Across hosts" table rewritten from what they measured
# (rows a run did not make keep their lines, and the list under the table
# says which command made each).
#
#   bash scripts/compose-faults.sh                    # every row, quick and long (about 6 minutes on 2 cores)
#   bash scripts/compose-faults.sh quick              # the four CI runs (about 2 minutes)
#   bash scripts/compose-faults.sh long               # the rolling restart, the store replica, the Cluster
#   bash scripts/compose-faults.sh edge-paused,rolling-restart
#
# Each row runs in a Compose project of its own (ankusa-cf-PID-ROW) on
# loopback ports chosen for it, with secrets made for it, and is taken down
# (`down -v`) after it, whatever happened. Builds first: the local stand-ins
# and this host's binaries (scripts/compose-images.sh, docker/offline.env)
# unless ANKUSA_COMPOSE_PULL=1 (an engine that pulls the public images), the
# project's images ($ANKUSA_IMAGE_TAG, default dev), then compose-faults and
# reliability. Exits with compose-faults' status (1: a row broke a promise or
# could not run), the table written either way.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
say() { printf '[compose-faults.sh] %s\n' "$*"; }

rows=${1:-all}
docker info >/dev/null 2>&1 || {
  echo "[compose-faults.sh] no Docker engine answers (docker info failed)" >&2
  exit 1
}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
env_file=(--env-file docker/offline.env)
if [[ ${ANKUSA_COMPOSE_PULL:-0} == 1 ]]; then
  env_file=()
else
  say "images: scripts/compose-images.sh"
  bash scripts/compose-images.sh
fi
say "build: ${compose[*]} build"
"${compose[@]}" -p ankusa-cf-build "${env_file[@]}" build 2>&1 | grep -e '^Successfully tagged' -e 'rror' || true
cargo build -q -p ankusa-tools --bin compose-faults --bin reliability

out=$(mktemp -d "${TMPDIR:-/tmp}/ankusa-cf-rows.XXXXXX")
trap 'rm -rf "$out"' EXIT
started=$(date -u +%Y-%m-%dT%H:%MZ)
status=0
target/debug/compose-faults "${env_file[@]}" --rows "$rows" --out "$out" || status=$?

if compgen -G "$out/*.json" >/dev/null; then
  cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
  version=$("${compose[@]}" version --short 2>/dev/null || "${compose[@]}" version | head -n 1)
  machine="$started, $(uname -srm), $(nproc) cores (${cpu:-unknown CPU}), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, Docker $(docker version -f '{{.Server.Version}}'), ${compose[*]} $version"
  target/debug/reliability --rows "$out" --doc RELIABILITY.md --across-hosts \
    --command "bash scripts/compose-faults.sh $rows" --machine "$machine"
fi
exit $status
