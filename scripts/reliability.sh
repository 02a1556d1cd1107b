#!/usr/bin/env bash
# The full fault suite and the hostile-input probes, then RELIABILITY.md's
# tables rewritten from what they measured. Every row runs on loopback only,
# bounded in time (about 20-40 s each; 10-15 minutes in all on 2 cores).
#
#   bash scripts/reliability.sh            # every row
#   bash scripts/reliability.sh store_     # rows whose test name holds "store_"
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

filter="${1:-}"
rows="$(mktemp -d)"
trap 'rm -rf "$rows"' EXIT
export ANKUSA_RELIABILITY_DIR="$rows"

cargo build --workspace --bins
cargo build -p ankusa-filter --target wasm32-wasip1 --release

# One row at a time: each starts its own fleet, and rows side by side would
# measure each other.
status=0
cargo test -p ankusa-tests --test faults -- --include-ignored --test-threads 1 $filter || status=$?
cargo test -p ankusa-tests --test hostile -- --include-ignored --test-threads 1 $filter || status=$?

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
machine="$(uname -srm), $(nproc) cores (${cpu:-unknown CPU}), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(date -u +%Y-%m-%dT%H:%MZ); debug builds of the store and the harness, release wasm filter, Envoy $(.venv/bin/envoy --version 2>/dev/null | grep -o '1\.[0-9]*\.[0-9]*' | head -1 || echo '?')."
cargo run -q -p ankusa-tests --bin reliability -- --rows "$rows" --doc RELIABILITY.md --machine "$machine"
exit $status
