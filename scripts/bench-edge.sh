#!/usr/bin/env bash
# What the Ankusa filter costs an edge. One Envoy set-up, one run, four
# variants side by side: (a) no wasm filter, (b) the filter on node scopes,
# (d) the same with GitHub signatures verified (signed hooks, same source),
# (c) the filter on fleet scopes (release ankusa-store, real Redis). Prints
# rate, p50/p99 and ratios to (a), Envoy CPU per hook, and what verification
# costs per hook, (d) beside (b). A benchmark, not a test.
#
#   scripts/bench-edge.sh             # 32 clients, 5 s per variant after 1 s warm-up
#   CLIENTS=64 SECONDS_RUN=10 scripts/bench-edge.sh
#
# Every process (Redis, ankusa-store, the intake, four Envoys) is started by
# bench-edge on free loopback ports and stopped by PID when it ends, fails or
# gets SIGTERM; the whole run is bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-32}
SECONDS_RUN=${SECONDS_RUN:-5}
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-2}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

cargo build --release -p ankusa-store --bins >&2
cargo build --release -p ankusa-tests --bin intake --bin bench-edge >&2
cargo build --release -p ankusa-filter --target wasm32-wasip1 >&2

# Start-up (four Envoys compiling the filter) plus four warm-ups and runs.
LIMIT=$(awk -v s="$SECONDS_RUN" -v w="$WARMUP" 'BEGIN { printf "%d", 240 + 8 * (s + w) }')
timeout --kill-after=10 "$LIMIT" "$TARGET_DIR/release/bench-edge" \
  --clients "$CLIENTS" --seconds "$SECONDS_RUN" --warmup-seconds "$WARMUP" --concurrency "$CONCURRENCY"
