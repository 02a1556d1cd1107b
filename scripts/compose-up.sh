#!/usr/bin/env bash
# scripts/compose-up.sh: the Compose stack on an engine that can't pull images,
# in one command. Builds the local stand-ins and this host's binaries
# (scripts/compose-images.sh), makes any missing secret in docker/secrets
# (docker/make-secrets.sh), starts the stack with docker/offline.env
# (`up -d --build` returns once every service is healthy), follows the mock
# provider's batch of traffic to its summary, and leaves the fleet running:
#
#   docker-compose --env-file docker/offline.env ps          what runs
#   docker-compose --env-file docker/offline.env run provider    another batch
#   docker-compose --env-file docker/offline.env down -v     stop, remove everything
#
# Extra arguments go to `up` (e.g. `--scale store=2`). With an engine that
# pulls, `docker compose up --build` needs none of this (docs/compose.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/compose-images.sh
bash docker/make-secrets.sh docker/secrets
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
compose+=(--env-file docker/offline.env)
echo "[compose] ${compose[*]} up -d --build $*"
"${compose[@]}" up -d --build "$@"
echo "[compose] the provider's batch (2 000 events, 20 % redelivered, 10 % forged):"
"${compose[@]}" logs --no-color -f provider || true
status=$(docker wait "$("${compose[@]}" ps -q provider)")
"${compose[@]}" ps
echo "[compose] provider exited $status (0: nothing lost, every forgery refused). Edges: 127.0.0.1:10001 and :10002, Prometheus: 127.0.0.1:9090, the intake's list: 127.0.0.1:8080/hooks"
exit "$status"
