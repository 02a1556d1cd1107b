#!/usr/bin/env bash
# Drives POST /v1/hit of a release ankusa-store with concurrent keep-alive
# clients, then runs the same hit script straight on the same Redis with
# redis-benchmark (EVALSHA, same keys and arguments), and prints both rates,
# their p50/p99 latency and the ratio. Then POST /v1/hits with BATCH hits
# per call (as edges send hooks that arrive together), in hits/s beside the
# same redis-benchmark rate. A benchmark, not a test.
#
#   scripts/bench-store.sh            # 32 clients, 5 s, 3 rounds
#   CLIENTS=64 SECONDS_RUN=10 BATCH=16 ROUNDS=5 STORE_THREADS=0 scripts/bench-store.sh
#   BASELINE_STORE=old/ankusa-store scripts/bench-store.sh
#       # before/after: another store build (e.g. an older commit's, built
#       # with `cargo build --release -p ankusa-store` in a worktree) on the
#       # same Redis, driven beside this one in every round (the order
#       # alternating), the store's CPU per hit of each and their ratio
#   MODE=memory EVENTS=1000000 scripts/bench-store.sh
#       # Redis memory per committed claim: the old layout (a string per
#       # event, as 0.2.0 commits it) against the compact one (written by the
#       # store's settle script), in the same run on a Redis of its own
#       # (`store-bench claims-memory`); TENANTS spreads the events.
#       # CLUSTER=1 (one tenant): on a Cluster of three masters of its own
#       # instead, the figures those of the master serving the tenant's slot
#   MODE=cpu HOOKS=200000 DEPTH=32 scripts/bench-store.sh
#       # Redis CPU and commands per fleet hook (hit, then promote): the
#       # previous release's scripts (OLD_REV, default the commit of
#       # CHANGELOG.md's v0.2.0) against this build's, alternating, in the
#       # same run on a Redis of its own (`store-bench claims-cpu`); Redis
#       # CPU from its main thread's /proc schedstat. AGED=1: the compact
#       # layout's steady state (the two partitions before the current one
#       # hold entries, so a hit reads three; AGED_EVENTS=N entries each,
#       # default 1000: N = HOOKS is a steady flow, as the current partition
#       # is sized from the one before it); SCRIPTS=DIR: this build's
#       # gcra/claims/hit/settle_batch.lua from DIR (a script change tried
#       # without a rebuild); the output adds each command's calls and µs per hook
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-32}
SECONDS_RUN=${SECONDS_RUN:-5}
BATCH=${BATCH:-8}
ROUNDS=${ROUNDS:-3}
BASELINE_STORE=${BASELINE_STORE:-}
# One worker thread, as Redis and redis-benchmark each run on one, and
# because on two cores shared by the load, the store and Redis a second one
# only adds hand-offs; STORE_THREADS=0 gives the store's default (one per core).
STORE_THREADS=${STORE_THREADS:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

cargo build --release -p ankusa-store --bins >&2
if [ "${MODE:-}" = memory ] || [ "${MODE:-}" = cpu ]; then
  DIR=$(mktemp -d)
  MEM_REDIS=()
  trap 'kill "${MEM_REDIS[@]}" 2>/dev/null; wait "${MEM_REDIS[@]}" 2>/dev/null; rm -rf "$DIR"' EXIT
  # One Redis (or, with CLUSTER=1, three Cluster masters), each with Redis's
  # own default listpack limit (a packaged build may raise it): the layout
  # must hold without a raised one.
  PORTS=()
  for i in $(seq 1 "$([ "${CLUSTER:-0}" = 1 ] && echo 3 || echo 1)"); do
    # A Cluster node also listens on its port + 10000 (the cluster bus):
    # both free, and the bus under 65536.
    port=$(python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p + 10000 < 65536:
        try:
            socket.socket().bind(("127.0.0.1", p + 10000)); print(p); break
        except OSError:
            pass')
    mkdir -p "$DIR/$i"
    cluster=()
    [ "${CLUSTER:-0}" = 1 ] && cluster=(--cluster-enabled yes --cluster-config-file "$DIR/$i/nodes.conf")
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR/$i" "${cluster[@]}" \
      --hash-max-listpack-entries 128 --hash-max-listpack-value 64 >"$DIR/$i/redis.log" 2>&1 &
    MEM_REDIS+=($!)
    PORTS+=("$port")
    for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.05; done
  done
  PORT=${PORTS[0]}
  if [ "${CLUSTER:-0}" = 1 ]; then
    [ "$MODE" = memory ] || { echo "bench-store.sh: CLUSTER=1 is for MODE=memory, not MODE=$MODE" >&2; exit 2; }
    [ "${TENANTS:-1}" = 1 ] || { echo "bench-store.sh: CLUSTER=1 measures one tenant's master: TENANTS=1, not TENANTS=$TENANTS" >&2; exit 2; }
    redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
    for _ in $(seq 1 100); do redis-cli -p "$PORT" CLUSTER INFO | grep -q cluster_state:ok && break; sleep 0.1; done
    # The tenants' keys all carry {tenant0}… tags; the first master serves
    # slots 0–5460, where {tenant0} (4616) falls.
    echo "Cluster of 3 masters; {tenant0} in slot $(redis-cli -p "$PORT" CLUSTER KEYSLOT '{tenant0}'), served by the master measured: $(redis-cli -p "$PORT" CLUSTER NODES | grep myself | awk '{print $NF}')"
  fi
  echo "Redis $(redis-server --version | awk '{print $3}'), hash-max-listpack-entries $(redis-cli -p "$PORT" CONFIG GET hash-max-listpack-entries | tail -1)"
  if [ "$MODE" = cpu ]; then
    OLD_REV=${OLD_REV:-$(grep -m 1 -E '^## v0\.2\.0' CHANGELOG.md | grep -oE 'commit [0-9a-f]+' | cut -d' ' -f2)}
    mkdir -p "$DIR/old"
    for f in gcra hit settle; do git show "$OLD_REV:store-service/src/scripts/$f.lua" >"$DIR/old/$f.lua"; done
    echo "old scripts: $OLD_REV"
    "$TARGET_DIR/release/store-bench" claims-cpu --redis-url "redis://127.0.0.1:$PORT/0" \
      --hooks "${HOOKS:-200000}" --depth "${DEPTH:-32}" --rounds "${ROUNDS:-3}" --old-scripts "$DIR/old" \
      ${AGED:+--aged} ${AGED_EVENTS:+--aged-events "$AGED_EVENTS"} ${SCRIPTS:+--scripts "$SCRIPTS"}
    exit 0
  fi
  for events in ${EVENTS:-1000000}; do
    "$TARGET_DIR/release/store-bench" claims-memory --redis-url "redis://127.0.0.1:$PORT/0" \
      --events "$events" --tenants "${TENANTS:-1}" --ttl-ms "${TTL_MS:-259200000}"
  done
  exit 0
fi
cargo build --release -p ankusa-tools --bin load >&2

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
REDIS_PORT=$(free_port)
STORE_PORT=$(free_port)
WORK=$(mktemp -d)
REDIS_PID=""
STORE_PID=""
BASE_PID=""
cleanup() {
  [ -n "$STORE_PID" ] && kill "$STORE_PID" 2>/dev/null && wait "$STORE_PID" 2>/dev/null || true
  [ -n "$BASE_PID" ] && kill "$BASE_PID" 2>/dev/null && wait "$BASE_PID" 2>/dev/null || true
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# A throw-away edge token (the benchmark only hits), passed by environment only (never on a command line),
# speaking for the one node the hits name, as an edge's does; a baseline store from before node
# scopes (BASELINE_STORE) gets the bare token, which it reads as the whole line.
BENCH_TOKEN="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
ANKUSA_STORE_EDGE_TOKENS="$BENCH_TOKEN nodes=bench"
BASELINE_TOKENS=${BASELINE_TOKENS:-$BENCH_TOKEN}
export BENCH_TOKEN ANKUSA_STORE_EDGE_TOKENS

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
# A store binary $1 on port $2 against the Redis, with the edge tokens $3
# (default: this build's); sets STARTED to its pid.
start_store() {
  ANKUSA_STORE_EDGE_TOKENS=${3:-$ANKUSA_STORE_EDGE_TOKENS} "$1" --listen "127.0.0.1:$2" --redis-url "redis://127.0.0.1:$REDIS_PORT/0" \
    --threads "$STORE_THREADS" >"$WORK/store-$2.log" 2>&1 &
  STARTED=$!
  for _ in $(seq 1 200); do
    curl -fs "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  curl -fs "http://127.0.0.1:$2/readyz" >/dev/null || { cat "$WORK/store-$2.log"; exit 1; }
}
start_store "$TARGET_DIR/release/ankusa-store" "$STORE_PORT"
STORE_PID=$STARTED
if [ -n "$BASELINE_STORE" ]; then
  [ -x "$BASELINE_STORE" ] || { echo "BASELINE_STORE: $BASELINE_STORE is not an executable" >&2; exit 2; }
  BASE_PORT=$(free_port)
  start_store "$BASELINE_STORE" "$BASE_PORT" "$BASELINE_TOKENS"
  BASE_PID=$STARTED
fi

echo "machine: $(nproc) cores; $CLIENTS clients, ${SECONDS_RUN}s a run, $ROUNDS rounds, store threads $STORE_THREADS (0: one per core); Redis $(redis-server --version | awk '{print $3}')"

# CPU seconds (user + system) a process has used, from /proc: the figure
# that holds on a busy machine where rates move with everything else.
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
# Commands Redis has run (those a script calls included), from INFO commandstats.
redis_calls() {
  redis-cli -p "$REDIS_PORT" INFO commandstats | sed -nE 's/^cmdstat_[^:]+:calls=([0-9]+),.*/\1/p' | awk '{ n += $1 } END { print n + 0 }'
}
# µs of CPU per unit between two readings $1 and $2, over $3 units.
us_per() {
  python3 -c 'import sys; a, b, n = map(float, sys.argv[1:4]); print(f"{(b - a) / n * 1e6:.1f}")' "$1" "$2" "$3"
}
# Drives the store's path $1 with body $2 for SECONDS_RUN (a 2xx counts when
# it starts with $3; each call carries $4 hits), on the store at port $5 with
# pid $6 (this build's by default). Sets LINE (load's line), RPS (calls/s),
# STORE_US (the store's CPU per hit) and PER_HIT (the store's and Redis's).
drive() {
  local s0 r0 s1 r1 ok port=${5:-$STORE_PORT} pid=${6:-$STORE_PID}
  local c0 c1
  s0=$(cpu_s "$pid"); r0=$(cpu_s "$REDIS_PID"); c0=$(redis_calls)
  LINE=$("$TARGET_DIR/release/load" --url "http://127.0.0.1:$port$1" \
    --header content-type:application/json --bearer-env BENCH_TOKEN --body "$2" --expect-body "$3" \
    --clients "$CLIENTS" --seconds "$SECONDS_RUN")
  s1=$(cpu_s "$pid"); r1=$(cpu_s "$REDIS_PID"); c1=$(redis_calls)
  RPS=$(sed -E 's/.*rps=([0-9]+).*/\1/' <<<"$LINE")
  ok=$(sed -E 's/.* ok=([0-9]+).*/\1/' <<<"$LINE")
  STORE_US=$(us_per "$s0" "$s1" "$((ok * $4))")
  PER_HIT="store $STORE_US µs, redis $(us_per "$r0" "$r1" "$((ok * $4))") µs of CPU per hit, $(python3 -c "import sys; print(f'{(int(sys.argv[2]) - int(sys.argv[1]) - 1) / max(1, int(sys.argv[3])):.1f}')" "$c0" "$c1" "$((ok * $4))") Redis commands per hit"
}

# This build's store CPU per hit against the baseline's on path $1 (body $2,
# $3, $4 hits a call), the order alternating by round ($5); appends the
# ratio to the list named $6.
against_baseline() {
  local new base
  if (( $5 % 2 )); then
    drive "$1" "${2//ROUND/n$5}" "$3" "$4"; new=$STORE_US
    drive "$1" "${2//ROUND/b$5}" "$3" "$4" "$BASE_PORT" "$BASE_PID"; base=$STORE_US
  else
    drive "$1" "${2//ROUND/b$5}" "$3" "$4" "$BASE_PORT" "$BASE_PID"; base=$STORE_US
    drive "$1" "${2//ROUND/n$5}" "$3" "$4"; new=$STORE_US
  fi
  local ratio
  ratio=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$new" "$base")
  printf -v "$6" '%s %s' "${!6}" "$ratio"
  echo "pair   $1, $4 hits a call: store CPU per hit $new µs, baseline $base µs, ratio $ratio"
}

# The same work as the redis-benchmark run below: one bucket that always
# admits, and a fresh claim key per hit ({i} is load's request counter,
# ROUND the round's number). A hit
# counts only if the store admitted it.
HIT='{"charges":[{"kind":"hooks","tenant":"bench","units":1,"rate":1000000000,"burst":4294967296}],"claim":{"tenant":"bench","source_id":"gh","key":"kROUND-{i}","hook_id":"h{i}","node":"bench","ttl_ms":60000,"pending_ttl_ms":30000},"node":"bench"}'
# The same script text the store loads; redis-benchmark calls it by SHA.
SHA=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$("$TARGET_DIR/release/store-bench" --print-hit-script)")
# The same hits, BATCH to a call on /v1/hits (fresh claim keys per hit).
HITS=$(python3 -c '
import json, sys
n = int(sys.argv[1])
hit = lambda j: {"charges": [{"kind": "hooks", "tenant": "bench", "units": 1, "rate": 1000000000, "burst": 4294967296}],
                 "claim": {"tenant": "bench", "source_id": "gh", "key": "bROUND-{i}-%d" % j, "hook_id": "h{i}-%d" % j,
                           "node": "bench", "ttl_ms": 60000, "pending_ttl_ms": 30000},
                 "node": "bench"}
print(json.dumps({"hits": [hit(j) for j in range(n)]}, separators=(",", ":")))' "$BATCH")

# Each round runs the three one after the other, so a change in what else
# the machine does falls on a round's three alike; the ratios are per round.
RATIOS=""
PAIR_HIT=""
PAIR_HITS=""
BATCHED=""
for round in $(seq 1 "$ROUNDS"); do
  echo "-- round $round of $ROUNDS"
  drive /v1/hit "${HIT//ROUND/$round}" '{"result":"ok"' 1
  STORE_RPS=$RPS
  echo "store  /v1/hit (HTTP/1.1 keep-alive):  $LINE"
  echo "       $PER_HIT"

  REQUESTS=$(( STORE_RPS > 0 ? STORE_RPS * SECONDS_RUN * 2 : 100000 ))
  # The partitions the lookup reads, named as the store names them (its
  # partition on this clock, then p+1 .. p-2; committed.rs `partitions_sent`).
  P=$(( $(date +%s%3N) / 30000 ))
  SERIES='ankusa:{bench}:committed:60000'
  R0=$(cpu_s "$REDIS_PID")
  CSV=$(redis-benchmark -p "$REDIS_PORT" -c "$CLIENTS" -n "$REQUESTS" -r 100000000 --csv \
    EVALSHA "$SHA" 3 'ankusa:{bench}:rl:hooks' 'ankusa:{bench}:override' 'ankusa:{bench}:claim:gh:__rand_int__' \
    1 1 1000000000 4294967296 h1 bench 30000 "$SERIES" 60000 'digest-of-14-b' \
    "$P" "$SERIES:$((P + 1))" "$SERIES:$P" "$SERIES:$((P - 1))" "$SERIES:$((P - 2))" | tail -1)
  # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  REDIS_RPS=$(awk -F'","' '{print $2}' <<<"$CSV")
  REDIS_P50=$(awk -F'","' '{print $5}' <<<"$CSV")
  REDIS_P99=$(awk -F'","' '{print $7}' <<<"$CSV")
  R1=$(cpu_s "$REDIS_PID")
  echo "redis  EVALSHA hit (redis-benchmark):   rps=${REDIS_RPS%.*} p50_ms=$REDIS_P50 p99_ms=$REDIS_P99 requests=$REQUESTS clients=$CLIENTS"
  echo "       redis $(us_per "$R0" "$R1" "$REQUESTS") µs of CPU per hit"
  RATIO=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$STORE_RPS" "$REDIS_RPS")
  RATIOS="$RATIOS $RATIO"
  echo "ratio  store/redis rate: $RATIO"

  drive /v1/hits "${HITS//ROUND/$round}" '{"results":[{"result":"ok"' "$BATCH"
  echo "store  /v1/hits, $BATCH hits per call:     $LINE"
  echo "       $PER_HIT"
  RATIO=$(python3 -c "import sys; print(f'{float(sys.argv[1]) * int(sys.argv[2]) / float(sys.argv[3]):.2f}')" "$RPS" "$BATCH" "$REDIS_RPS")
  BATCHED="$BATCHED $RATIO"
  echo "ratio  store/redis rate, batched: $RATIO ($((RPS * BATCH)) hits/s)"

  if [ -n "$BASELINE_STORE" ]; then
    against_baseline /v1/hit "$HIT" '{"result":"ok"' 1 "$round" PAIR_HIT
    against_baseline /v1/hits "$HITS" '{"results":[{"result":"ok"' "$BATCH" "$round" PAIR_HITS
  fi
done

# The median of the rounds' ratios, and their range.
summary() {
  python3 -c '
import statistics, sys
r = sorted(map(float, sys.argv[2:]))
print(f"{sys.argv[1]}: {statistics.median(r):.2f} [{r[0]:.2f}–{r[-1]:.2f}] over {len(r)} rounds")' "$@"
}
echo "== store/redis rate, median of the rounds"
summary "/v1/hit, one hit per call" $RATIOS
summary "/v1/hits, $BATCH hits per call" $BATCHED
if [ -n "$BASELINE_STORE" ]; then
  echo "== store CPU per hit, this build / the baseline, median of the rounds"
  summary "/v1/hit, one hit per call" $PAIR_HIT
  summary "/v1/hits, $BATCH hits per call" $PAIR_HITS
fi
