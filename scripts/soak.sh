#!/usr/bin/env bash
# The soak (RELIABILITY.md, "Soak"): builds the release binaries and the
# filter, then runs `soak` for $MINUTES minutes (30 by default) with $SEED
# (default: drawn from the clock and printed, with the command to replay it).
# The run's JSON goes to $OUT (target/soak by default). Exits 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

cargo build --release --workspace --bins
cargo build -p ankusa-filter --target wasm32-wasip1 --release
export ANKUSA_PROFILE=release
args=(--minutes "${MINUTES:-30}" --out "${OUT:-target/soak}")
if [[ -n "${SEED:-}" ]]; then
  args+=(--seed "$SEED")
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
exec target/release/soak "${args[@]}"
