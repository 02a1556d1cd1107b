#!/usr/bin/env bash
# What a fleet of two edges on fleet scopes costs the store and Redis, and
# whether it stays flat: release ankusa-store, a real Redis, the intake and two
# Envoy edges on free loopback ports, stopped by PID when the run ends, fails
# or gets SIGTERM; the whole run is bounded by `timeout`. A benchmark, not a test.
#
#   scripts/bench-fleet.sh settle                    # Redis round trips per 100 settled hooks at 100, 1 000, 5 000 hooks/s
#   scripts/bench-fleet.sh settle --rates 2000 --seconds 20
#   scripts/bench-fleet.sh memory                    # RSS after every 100 000 of 1 000 000 hooks over 100 000 ids
#   scripts/bench-fleet.sh memory --hooks 300000 --keys 100000
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LIMIT=${LIMIT:-3600}

cargo build --release -p ankusa-store --bins >&2
cargo build --release -p ankusa-tools --bin intake --bin bench-fleet >&2
cargo build --release --target wasm32-wasip1 -p ankusa-filter >&2

timeout --kill-after=10 "$LIMIT" "$TARGET_DIR/release/bench-fleet" "$@"
