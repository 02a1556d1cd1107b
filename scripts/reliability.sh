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

# The rows: the fault suite's and the hostile-input probes' tests whose name
# holds the filter. One row at a time: each starts its own fleet, and rows
# side by side would measure each other.
cargo test -q -p ankusa-tests --test e2e --no-run
mapfile -t tests < <(cargo test -q -p ankusa-tests --test e2e -- --list --include-ignored 2>/dev/null |
  sed -n 's/: test$//p' | grep -E '^(faults|hostile)::' | grep -F -- "$filter" || true)
if ((${#tests[@]} == 0)); then
  echo "no fault or hostile-input row matches \"$filter\"" >&2
  exit 2
fi
status=0
cargo test -p ankusa-tests --test e2e -- --include-ignored --test-threads 1 --exact "${tests[@]}" || status=$?

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
machine="$(uname -srm), $(nproc) cores (${cpu:-unknown CPU}), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(date -u +%Y-%m-%dT%H:%MZ); debug builds of the store and the harness, release wasm filter, Envoy $(.venv/bin/envoy --version 2>/dev/null | grep -o '1\.[0-9]*\.[0-9]*' | head -1 || echo '?')."
cargo run -q -p ankusa-tools --bin reliability -- --rows "$rows" --doc RELIABILITY.md --machine "$machine"
exit $status
