#!/usr/bin/env bash
# The local fleet in one command: builds what is needed, starts Redis, the
# store, the sample intake and two Envoy edges with fleet scopes, sends
# mock-provider traffic at them (GitHub deliveries, a fifth redelivered to the
# other edge, faster than the tenant's quota so some are refused with 429 and
# retried), prints the provider's summary and the key metrics of the edges and
# the store, and stops everything.
#
# Knobs (environment): EVENTS (2000), RATE (300 events/s), REDELIVER (0.2),
# QUOTA (150 hooks/s for tenant acme, burst as large), BASE_PORT (20000: Redis
# on it, store +1, intake +2, edge-i on +10·i, admin +10·i+1), DEADLINE_S (90),
# PENDING_TTL_MS (5000: how long a claim may stay in flight; a copy racing it
# is answered 409 with Retry-After for the time left, so this bounds the wait),
# FORGE (0.1: share of events the provider also forges — wrong secret, stale
# timestamp, or unsigned; each must be refused 401 and cost the tenant nothing).
#
# Sources gh and stripe verify signatures with secrets generated for this run
# (ANKUSA_GH_SECRET, ANKUSA_STRIPE_SECRET, or yours if already set): they reach
# the edges' filter VMs through the environment, never through the config.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

EVENTS=${EVENTS:-2000}
RATE=${RATE:-300}
REDELIVER=${REDELIVER:-0.2}
QUOTA=${QUOTA:-150}
BASE_PORT=${BASE_PORT:-20000}
DEADLINE_S=${DEADLINE_S:-90}
PENDING_TTL_MS=${PENDING_TTL_MS:-5000}
FORGE=${FORGE:-0.1}
new_secret() { python3 -c 'import secrets; print("whsec_" + secrets.token_urlsafe(24))'; }
ANKUSA_GH_SECRET=${ANKUSA_GH_SECRET:-$(new_secret)}
ANKUSA_STRIPE_SECRET=${ANKUSA_STRIPE_SECRET:-$(new_secret)}
export ANKUSA_GH_SECRET ANKUSA_STRIPE_SECRET

say() { printf '\n== %s\n' "$*"; }

bash scripts/setup.sh

say "build: the filter (wasm32-wasip1, release), the store, intake, mock-provider and fleet"
cargo build -q -p ankusa-filter --target wasm32-wasip1 --release
cargo build -q -p ankusa-store -p ankusa-tools --bins
# The binaries just built, whatever else target/ holds.
export ANKUSA_PROFILE=debug
bin=target/debug

run_dir=target/demo
mkdir -p "$run_dir"
config=$run_dir/filter-config.json
cat >"$config" <<JSON
{
  "sources": {
    "gh": {"tenant": "acme", "dedupe": "github",
           "verify": {"scheme": "github", "secret_env": "ANKUSA_GH_SECRET"}},
    "stripe": {"tenant": "acme", "dedupe": {"json": "id"},
               "verify": {"scheme": "stripe", "secret_env": "ANKUSA_STRIPE_SECRET"}}
  },
  "rate_limits": {
    "scope": "fleet",
    "default": {"rate": 50, "burst": 100},
    "tenants": {"acme": {"rate": $QUOTA, "burst": $QUOTA}}
  },
  "dedupe": {"scope": "fleet"},
  "fleet": {"cluster": "ankusa_store", "timeout_ms": 250, "pending_ttl_ms": $PENDING_TTL_MS}
}
JSON

say "start: fleet --edges 2 --base-port $BASE_PORT (tenant acme: $QUOTA hooks/s, fleet scopes, signatures verified on gh and stripe)"
"$bin/fleet" --edges 2 --base-port "$BASE_PORT" --filter-config "$config" \
  --vm-env ANKUSA_GH_SECRET --vm-env ANKUSA_STRIPE_SECRET \
  >"$run_dir/fleet.out" 2>"$run_dir/fleet.log" &
fleet_pid=$!

stop_fleet() {
  if kill -0 "$fleet_pid" 2>/dev/null; then
    kill -TERM "$fleet_pid" 2>/dev/null || true
    for _ in $(seq 300); do
      kill -0 "$fleet_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$fleet_pid" 2>/dev/null || true
  fi
  wait "$fleet_pid" 2>/dev/null || true
}
trap stop_fleet EXIT
trap 'exit 130' INT TERM

ready=""
for _ in $(seq 1200); do
  ready=$(grep -m1 '^READY ' "$run_dir/fleet.out" || true)
  [[ -n "$ready" ]] && break
  if ! kill -0 "$fleet_pid" 2>/dev/null; then
    echo "fleet exited before it was ready:" >&2
    tail -n 40 "$run_dir/fleet.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$ready" ]]; then
  echo "fleet not ready within 120 s; its log:" >&2
  tail -n 40 "$run_dir/fleet.log" >&2
  exit 1
fi
ready_json=${ready#READY }
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print(",".join(v) if isinstance(v,list) else v)' "$ready_json" "$1"; }
edges=$(field edges)
admins=$(field admins)
store=$(field store)
intake=$(field intake)
echo "edges $edges | admins $admins | store $store | intake $intake | redis $(field redis)"
echo "each edge holds its own store token (it speaks for that edge's node alone); the operator token (to change overrides) is in $(field operator_token_file)"
echo "the store commits a claim only with the intake's receipt for the hook; their shared key is in $(field receipt_key_file)"

say "traffic: mock-provider, $EVENTS GitHub events at $RATE/s, ${REDELIVER} redelivered to the other edge, ${FORGE} also forged"
status=0
"$bin/mock-provider" --edges "$edges" --intake "$intake" --profile github --tenant acme --source gh \
  --secret-env ANKUSA_GH_SECRET --forge "$FORGE" \
  --events "$EVENTS" --rate "$RATE" --redeliver "$REDELIVER" --deadline-s "$DEADLINE_S" || status=$?

# Prometheus lines starting with a prefix, histogram buckets left out.
metrics() {
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request
url, prefix = sys.argv[1], sys.argv[2]
try:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
except Exception as e:
    print(f"  ({url}: {e})")
    sys.exit(0)
for line in text.splitlines():
    if line.startswith(prefix) and "_bucket{" not in line:
        print("  " + line)
PY
}

IFS=, read -r -a admin_list <<<"$admins"
for i in "${!admin_list[@]}"; do
  say "edge-$((i + 1)) metrics (${admin_list[$i]}/stats/prometheus, ankusa_*)"
  metrics "${admin_list[$i]}/stats/prometheus" ankusa_
done
say "store metrics ($store/metrics, ankusa_store_*)"
metrics "$store/metrics" ankusa_store_

say "stop: fleet (pid $fleet_pid)"
stop_fleet
tail -n 1 "$run_dir/fleet.log"
if ((status == 0)); then
  echo "demo ok: nothing acknowledged was lost, nothing stored twice, every forgery refused 401"
else
  echo "demo FAILED: mock-provider exited $status (see the table above; logs under $(field dir))" >&2
fi
exit "$status"
