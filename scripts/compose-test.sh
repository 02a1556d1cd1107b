#!/usr/bin/env bash
# scripts/compose-test.sh: docker-compose.yml for real, on this machine's
# Docker engine (scripts/test.sh runs it).
#
#  1. Builds the images: the local stand-ins and this host's binaries
#     (scripts/compose-images.sh, docker/offline.env) unless
#     ANKUSA_COMPOSE_PULL=1 (an engine that pulls the public images).
#  2. `up -d --build` in a project of its own (ankusa-ct-PID), on ephemeral
#     loopback ports, with secrets made for the run in a temporary folder.
#     It returns once every service's healthcheck passes.
#  3. Runs the mock provider's container: 2 000 events, 20 % redelivered to
#     the other edge, 10 % forged. Checks: lost 0, stored duplicates 0,
#     every forgery answered 401, each edge's and the store's counters moved
#     (read through Prometheus), Prometheus has every target up and the alert
#     rules loaded.
#  4. Checks no secret's value is in any container's or image's configuration
#     (`docker inspect`), in an image's layers (`docker save`), in an edge's
#     config dump or in any service's log.
#  5. `down -v`, then checks no container, network or volume of the project is left.
#  6. The quick fault rows across hosts (compose-faults, each in a stack of
#     its own: an edge cut off from the store's network, the store killed,
#     Redis killed and restarted from its AOF, an edge paused), each against
#     the fault table's promises.
#
# On a machine without an engine it says SKIPPED and exits 0, except with
# CI=true, where a missing engine is a failure. Knobs: ANKUSA_COMPOSE_ROWS
# (the fault rows to run, comma separated; `none` for none; default the
# quick ones), ANKUSA_COMPOSE_PROFILE (release or debug binaries in the images),
# ANKUSA_COMPOSE_PULL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
started=$SECONDS
say() { printf '[compose-test %4ss] %s\n' "$((SECONDS - started))" "$*"; }
fail() {
  printf '[compose-test] FAIL: %s\n' "$*" >&2
  exit 1
}

if ! docker info >/dev/null 2>&1; then
  if [[ ${CI:-} == true ]]; then
    fail "no Docker engine answers (docker info failed); on CI one must run"
  fi
  say "SKIPPED: no Docker engine answers (docker info failed); with CI=true this fails"
  exit 0
fi
if docker compose version >/dev/null 2>&1; then compose_cmd=(docker compose); else compose_cmd=(docker-compose); fi
command -v "${compose_cmd[0]}" >/dev/null || fail "neither 'docker compose' nor docker-compose is installed (scripts/setup.sh installs docker-compose)"

project=${ANKUSA_COMPOSE_PROJECT:-ankusa-ct-$$}
secrets=$(mktemp -d "${TMPDIR:-/tmp}/ankusa-ct-secrets.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/ankusa-ct.XXXXXX")
env_file=(--env-file docker/offline.env)
[[ ${ANKUSA_COMPOSE_PULL:-0} == 1 ]] && env_file=()
compose=("${compose_cmd[@]}" -p "$project" "${env_file[@]}")
# Ephemeral ports on the loopback: nothing of a user's stack or of another
# test is in the way.
export ANKUSA_SECRETS_DIR=$secrets ANKUSA_IMAGE_TAG=${ANKUSA_IMAGE_TAG:-ct}
export ANKUSA_EDGES_IP=127.0.0.1 ANKUSA_EDGE_1_PORT= ANKUSA_EDGE_2_PORT= \
  ANKUSA_EDGE_1_ADMIN_PORT= ANKUSA_EDGE_2_ADMIN_PORT= ANKUSA_INTAKE_PORT= \
  ANKUSA_PROMETHEUS_PORT= ANKUSA_GRAFANA_PORT=

leftovers() {
  local label=label=com.docker.compose.project=$project
  {
    docker ps -a -q --filter "$label" | sed 's/^/container /'
    docker network ls -q --filter "$label" | sed 's/^/network /'
    docker volume ls -q --filter "$label" | sed 's/^/volume /'
  } || true
}
cleanup() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    say "logs of the failed run:"
    "${compose[@]}" logs --no-color --tail=40 2>&1 | tail -n 200 || true
  fi
  "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$secrets" "$work"
  exit "$status"
}
trap cleanup EXIT

if [[ ${ANKUSA_COMPOSE_PULL:-0} != 1 ]]; then
  say "images: scripts/compose-images.sh"
  bash scripts/compose-images.sh
fi
bash docker/make-secrets.sh "$secrets" >/dev/null
"${compose[@]}" config -q || fail "docker-compose.yml does not validate"

say "build"
"${compose[@]}" build 2>&1 | grep -v -e DEPRECATED -e 'Install the buildx' -e 'docs.docker.com/go/buildx' >"$work/build.log" ||
  true
for image in edge store intake provider; do
  docker image inspect "ankusa/$image:$ANKUSA_IMAGE_TAG" >/dev/null 2>&1 || {
    tail -n 40 "$work/build.log" >&2
    fail "ankusa/$image:$ANKUSA_IMAGE_TAG was not built"
  }
done
say "up -d (returns once every healthcheck passes)"
up_started=$SECONDS
"${compose[@]}" up -d --scale provider=0 2>&1 | sed 's/^/  /'
say "up took $((SECONDS - up_started)) s"
for service in redis store intake edge-1 edge-2 prometheus; do
  id=$("${compose[@]}" ps -q "$service")
  [[ -n $id ]] || fail "$service has no container"
  health=$(docker inspect -f '{{.State.Health.Status}}' "$id")
  # Prometheus is the last to start: nothing waits for it, so give it its time.
  for _ in $(seq 60); do
    [[ $health == healthy ]] && break
    sleep 1
    health=$(docker inspect -f '{{.State.Health.Status}}' "$id")
  done
  [[ $health == healthy ]] || fail "$service is $health, not healthy"
  user=$(docker inspect -f '{{.Config.User}}' "$id")
  [[ -n $user && $user != root && $user != 0 && $user != 0:0 ]] || fail "$service runs as root (user '$user')"
done
say "every service healthy, none as root"

port_of() { "${compose[@]}" port "$1" "$2" | tail -n 1; }
prometheus=http://$(port_of prometheus 9090)
edge_admin=(http://$(port_of edge-1 9901) http://$(port_of edge-2 9901))

say "provider: 2 000 events, 20 % redelivered to the other edge, 10 % forged"
set +e
"${compose[@]}" run --rm -T --no-deps provider \
  --edges=http://edge-1:10000,http://edge-2:10000 --intake=http://intake:8080 \
  --profile=github --tenant=acme --source=gh --events=2000 --rate=300 \
  --redeliver=0.2 --forge=0.1 --deadline-s=120 --secret-env=ANKUSA_GH_SECRET \
  --quiet --json >"$work/provider.json" 2>"$work/provider.txt"
provider_status=$?
set -e
cat "$work/provider.txt"
[[ $provider_status -eq 0 ]] || fail "the provider exited $provider_status (1: lost or a forgery admitted, 3: no audit)"

python3 - "$work/provider.json" "$prometheus" "${edge_admin[@]}" deploy/prometheus/alerts.yml <<'EOF'
import json, sys, time, urllib.request, urllib.parse

summary_path, prometheus, admin1, admin2, alerts = sys.argv[1:6]
s = json.load(open(summary_path))
def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        sys.exit(1)

check(s["events"] == 2000, f"events sent: {s['events']}")
check(s["redeliveries"] > 300, f"redeliveries to the other edge: {s['redeliveries']}")
check(s["lost"] == 0, f"lost: {s['lost']} {s['lost_keys']}")
check(s["stored_duplicates"] == 0, f"stored duplicates: {s['stored_duplicates']}")
check(s["acknowledged"] == s["sent"], f"acknowledged {s['acknowledged']} of {s['sent']} deliveries")
check(s["forged_sent"] > 100 and s["forged_rejected"] == s["forged_sent"],
      f"forgeries refused 401: {s['forged_rejected']} of {s['forged_sent']}")

def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)
def query(q):
    return get(prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))["data"]["result"]

# Counters that moved, as Prometheus scraped them (every 5 s): wait for a
# scrape after the traffic.
want = {"edge-1:9901", "edge-2:9901"}
deadline = time.time() + 30
while True:
    admitted = {r["metric"]["instance"]: float(r["value"][1])
                for r in query('sum by (instance) (ankusa_admissions_total{outcome="admitted"})')}
    store = {r["metric"]["endpoint"]: float(r["value"][1])
             for r in query('sum by (endpoint) (ankusa_store_requests_total)')}
    hits = store.get("hit", 0) + store.get("hits", 0)
    moved = all(admitted.get(i, 0) > 0 for i in want) and hits > 0 and store.get("settle", 0) > 0
    if moved or time.time() > deadline:
        break
    time.sleep(1)
check(all(admitted.get(i, 0) > 0 for i in want), f"each edge admitted hooks (Prometheus): {admitted}")
check(hits > 0 and store.get("settle", 0) > 0, f"the store's hit and settle counters moved (Prometheus): {store}")
# The live edge count each edge last heard from the store (informative: an
# edge whose calls all ran past their budget on a starved machine has heard none).
live = {r["metric"]["instance"]: float(r["value"][1]) for r in query("ankusa_fleet_live_edges")}
fallbacks = {r["metric"]["instance"]: float(r["value"][1]) for r in query("ankusa_fleet_fallback_total")}
print(f"  info  live edges each edge heard: {live}; hooks answered without the store: {fallbacks}")

targets = get(prometheus + "/api/v1/targets")["data"]["activeTargets"]
up = sorted((t["labels"]["job"], t["labels"]["instance"], t["health"]) for t in targets)
check(len(up) == 3 and all(h == "up" for _, _, h in up), f"every target up: {up}")
rules = [r for g in get(prometheus + "/api/v1/rules")["data"]["groups"] for r in g["rules"]]
written = sum(1 for line in open(alerts) if line.strip().startswith("- alert:"))
check(len(rules) == written and all(r.get("health") == "ok" for r in rules),
      f"alert rules loaded: {len(rules)} of {written} in {alerts}, all healthy")
EOF

say "no secret in a container's or image's configuration, an image layer, a config dump or a log"
# Each secret's value is the first word of its lines: store_edge_token lists
# the edges' own tokens, each followed by the node it speaks for.
mapfile -t values < <(cat "$secrets"/* | grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' | awk '{print $1}' | sort -u)
[[ ${#values[@]} -eq 6 ]] || fail "expected 6 secret values in $secrets (2 edge tokens, operator token, receipt key, 2 signing secrets), found ${#values[@]}"
containers=$("${compose[@]}" ps -q)
docker inspect $containers >"$work/inspect.json"
images=()
for image in edge store intake provider; do images+=("ankusa/$image:$ANKUSA_IMAGE_TAG"); done
docker image inspect "${images[@]}" >>"$work/inspect.json"
"${compose[@]}" logs --no-color >"$work/logs.txt" 2>&1
for admin in "${edge_admin[@]}"; do
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/config_dump", timeout=10).read().decode())' "$admin" >>"$work/config_dump.json"
done
for file in inspect.json logs.txt config_dump.json provider.txt provider.json; do
  for value in "${values[@]}"; do
    if grep -qF -- "$value" "$work/$file"; then fail "a secret's value is in $file"; fi
  done
done
# The edges did get them: Envoy's environment holds the store token it sends.
env_has=$(docker exec "$("${compose[@]}" ps -q edge-1)" sh -c 'tr "\0" "\n" </proc/1/environ | grep -c "^ANKUSA_STORE_TOKEN=" || true')
[[ $env_has == 1 ]] || fail "edge-1's Envoy has no ANKUSA_STORE_TOKEN in its environment"
for image in "${images[@]}"; do
  layers=$(docker save "$image" | grep -a -c -F -f <(printf '%s\n' "${values[@]}") || true)
  [[ $layers == 0 ]] || fail "a secret's value is in a layer of $image"
done
echo "  ok    none of the ${#values[@]} secrets in docker inspect, $((${#images[@]})) images' layers, 2 config dumps, the logs"

say "down -v"
"${compose[@]}" down -v --remove-orphans 2>&1 | sed 's/^/  /'
left=$(leftovers)
[[ -z $left ]] || fail "down -v left: $left"
echo "  ok    no container, network or volume of $project is left"

rows=${ANKUSA_COMPOSE_ROWS:-quick}
if [[ $rows != none ]]; then
  say "fault rows across hosts: $rows"
  # In stacks of their own (each row's compose project), torn down after.
  cargo build -q -p ankusa-tools --bin compose-faults
  target/debug/compose-faults "${env_file[@]}" --rows "$rows" --out "$work/rows" ||
    fail "a fault row broke a promise (its table is above)"
fi

say "all green"
