#!/usr/bin/env bash
# What the Ankusa filter costs an edge, as Envoy CPU per hook beside other
# edges: (a) the router alone, (l) Envoy's native local_ratelimit, (n) a
# no-op wasm filter, (f) a wasm filter making one callout per hook, then the
# filter on (b) node scopes, (d) node scopes verifying GitHub signatures,
# (c) fleet scopes (release ankusa-store, real Redis) and (o) fleet scopes
# with the store down and the breaker open. Every Envoy has one worker pinned
# to CPU 0, everything else runs on CPU 1; Envoy CPU per hook comes from
# /proc. Every variant that calls a store (the floor, fleet scopes) has its
# own ankusa-store and Redis, so their CPU per hook is that variant's too:
# the total column is Envoy + store + Redis per hook. Two modes: sequential
# (one Envoy at a time, rounds in alternating order) and concurrent (every
# Envoy loaded at once on CPU 0: ratios taken in the same moment). Prints
# rates, latencies, CPU per hook, and the ratios beside the goals. A
# benchmark, not a test.
#
#   scripts/bench-edge.sh                      # both modes, 32 clients, 3 rounds of 3 s
#   MODE=concurrent ROUNDS=5 scripts/bench-edge.sh
#   ONLY=anbfc SECONDS_RUN=1 ROUNDS=1 scripts/bench-edge.sh   # a quick look
#   BASELINE_WASM=old.wasm ONLY=bBcC MODE=concurrent scripts/bench-edge.sh
#       # before/after: (B) and (C) run another filter build (e.g. an older
#       # commit's, built with `cargo build -p ankusa-filter --target
#       # wasm32-wasip1 --release` in a worktree) beside (b) and (c)
#   BASELINE_WASM=old.wasm MODE=concurrent PER_ENVOY=1,4,32 ONLY=nfbcBC scripts/bench-edge.sh
#       # low load and high: every variant at 1 client per Envoy, then at 4,
#       # then at 32 (PER_ENVOY overrides CLIENTS' even split)
#   LIMITADOR=/path/to/limitador-server MODE=concurrent PER_ENVOY=1,4,32 ONLY=fcp scripts/bench-edge.sh
#       # and (p), the peer: Envoy's native ratelimit filter asking Limitador
#       # (Kuadrant's rate-limit service, v2, built from its source with
#       # `cargo build --release -p limitador-server`; it needs
#       # protobuf-compiler and libclang-dev) over gRPC, its counters in a
#       # Redis of its own. Optional: only run when LIMITADOR is given
#   PERF_DIR=/tmp/prof MODE=concurrent PER_ENVOY=1,4,32 ONLY=nfc ROUNDS=2 scripts/bench-edge.sh
#       # and `perf record` on the Envoys' core during each load: each
#       # Envoy's CPU per hook split into Envoy code, kernel, V8 code, libc
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=nfhoc scripts/bench-edge.sh
#       # and (h), the hit floor: the callout floor making a real hit on the
#       # store's /v1/hit per hook (a fresh claim each time, the answer read
#       # and dropped) instead of GET /healthz: what a store call's own work
#       # and wait cost Envoy, beside (f). Only run when ONLY names it
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=nbNdD scripts/bench-edge.sh
#       # and (N), (D): the same node configurations as (b), (d) run by the
#       # native module (libankusa_module.so, Envoy's dynamic modules filter)
#       # instead of the wasm filter. Only run when ONLY names them
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=nkbfhc ROUNDS=3 scripts/bench-edge.sh
#       # the wasm filter's regression goals, each printed met or not: node
#       # (b)/(k) <= 1.10, fleet (c)/(h) <= 1.25 at 1 and 4 clients and
#       # <= 0.95 at 32 (lines starting "regression")
#   LIMITADOR=… MODE=concurrent PER_ENVOY=1,4,32 ONLY=MGNFp ROUNDS=3 scripts/bench-edge.sh
#       # and the native module's own: (M) a native no-op module and (G) a
#       # native one-callout floor (module/src/floor.rs, a separate build of
#       # the module's crate), (F) fleet scopes through the native module;
#       # printed with the native goals: (F)/(p) ≤ 1.0 at 1 client and ≤ 0.8
#       # at 4 and 32, total CPU (F)/(p) ≤ 0.8 at 32, (N)/(M) ≤ 1.10
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=nMNK ROUNDS=3 scripts/bench-edge.sh
#       # and (K), the native host-call floor: the native no-op making every
#       # host call a node hook of the module makes, with fixed values
#       # (module/src/floor/node_calls.rs); printed (N)/(K) and (K)/(M) with
#       # what the native node goal (N)/(M) <= 1.10 leaves over the floor
#       # (lines starting "native floor"). Only run when ONLY names it
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=GFcH ROUNDS=2 scripts/bench-edge.sh
#       # and (H): (F)'s configuration with its store calls on the module's
#       # own keep-alive connection (fleet.connection "direct"), answered
#       # through each hook's stream scheduler, beside (F), (G) and (c) (and
#       # the peer when LIMITADOR is set). Only run when ONLY names it
#   MODE=concurrent PER_ENVOY=1,4,32 ONLY=nkb ROUNDS=5 scripts/bench-edge.sh
#       # and (k), the host-call floor: the no-op filter making every host
#       # call a node hook makes (headers read, clock, the bucket's get and
#       # compare-and-swap, four forwarded headers, the counter, two
#       # RateLimit headers, the access log's decision) with fixed values:
#       # what no decision logic can go below. Only run when ONLY names it
#
# Every process (Redis, ankusa-store, the intake, the Envoys) is started by
# bench-edge on free loopback ports and stopped by PID when it ends, fails or
# gets SIGTERM; the whole run is bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-32}
PER_ENVOY=${PER_ENVOY:-}
SECONDS_RUN=${SECONDS_RUN:-3}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-1}
MODE=${MODE:-both}
BASELINE_WASM=${BASELINE_WASM:-}
LIMITADOR=${LIMITADOR:-}
default_only=alnfbdco
[ -z "$LIMITADOR" ] || default_only+=p
[ -z "$BASELINE_WASM" ] || default_only+=BC
ONLY=${ONLY:-$default_only}
PIN=${PIN:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

cargo build --release -p ankusa-store --bins >&2
cargo build --release -p ankusa-tools --bin intake --bin bench-edge >&2
cargo build --release --target wasm32-wasip1 \
  -p ankusa-filter -p ankusa-bench-noop -p ankusa-bench-callout >&2
case "$ONLY" in *[NDFMKGH]*) cargo build --profile release-native -p ankusa-module >&2 ;; esac
case "$ONLY" in *[MKG]*)
  # The native floors: a separate build of the module's crate, copied beside
  # the module under a name of its own (Envoy loads modules by name).
  cargo build --profile release-floor -p ankusa-module --features floor >&2
  cp "$TARGET_DIR/release-floor/libankusa_module.so" "$TARGET_DIR/release-native/libankusa_floor.so" ;;
esac

extra_args=()
[ "$PIN" = 1 ] || extra_args=(--no-pin)
[ -z "$BASELINE_WASM" ] || extra_args+=(--baseline-wasm "$BASELINE_WASM")
[ -z "$LIMITADOR" ] || extra_args+=(--limitador "$LIMITADOR")
[ -z "$PER_ENVOY" ] || extra_args+=(--per-envoy "$PER_ENVOY")
[ -z "${PERF_DIR:-}" ] || extra_args+=(--perf "$PERF_DIR")

# Start-up (eight Envoys compiling their modules), warm-ups, then per mode
# ROUNDS rounds: one run per variant (sequential) or one for all (concurrent).
LOADS=$(awk -v p="$PER_ENVOY" 'BEGIN { print (p == "" ? 1 : split(p, a, ",")) }')
LIMIT=$(awk -v s="$SECONDS_RUN" -v w="$WARMUP" -v r="$ROUNDS" -v n="${#ONLY}" -v l="$LOADS" \
  'BEGIN { printf "%d", 300 + n * (w + 6) + r * (n + l) * (s + 2) }')
timeout --kill-after=10 "$LIMIT" "$TARGET_DIR/release/bench-edge" \
  --clients "$CLIENTS" --seconds "$SECONDS_RUN" --rounds "$ROUNDS" \
  --warmup-seconds "$WARMUP" --concurrency "$CONCURRENCY" --mode "$MODE" \
  --only "$ONLY" "${extra_args[@]}"
