#!/usr/bin/env bash
# scripts/mixed-versions.sh: upgrading in any order, through real processes.
# Builds the previous release (the commit CHANGELOG.md names for it, or its
# tag when the clone has it) into a cache, then runs tests/e2e/mixed_versions.rs:
# the previous release's store and filter against this release's in every
# mix a rolling upgrade passes through (previous edges with this store, this
# release's edges with the previous store, one edge of each with either
# store, and stores of both releases on one Redis). Each mix keeps the tenant's quota and an override as one fleet-wide
# limit and stores the mock provider's events once, none lost.
#
#   scripts/mixed-versions.sh              # about 8 minutes the first time on 2 cores, 2 after
#
# Knobs: ANKUSA_PREVIOUS (a tag or commit; default: CHANGELOG.md's previous
# release), ANKUSA_PREVIOUS_CACHE (default ~/.cache/ankusa-previous).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
say() { printf '[mixed] %s\n' "$*"; }

# The previous release: the first `## vX.Y.Z` heading of CHANGELOG.md when
# this release is still `## Unreleased` above it, else the second (the first
# is this release); its line names its commit.
nth=2
grep -m 1 -E '^## ' CHANGELOG.md | grep -q '^## Unreleased' && nth=1
line=$(grep -m "$nth" -E '^## v[0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md | tail -n 1)
version=$(sed -E 's/^## (v[0-9.]+).*/\1/' <<<"$line")
commit=$(grep -oE 'commit [0-9a-f]{7,40}' <<<"$line" | cut -d' ' -f2)
want=${ANKUSA_PREVIOUS:-$version}
rev=$(git rev-parse -q --verify "$want^{commit}" 2>/dev/null || git rev-parse -q --verify "${commit:-none}^{commit}" 2>/dev/null || true)
[[ -n $rev ]] || { echo "mixed-versions: neither $want nor commit '${commit:-}' from CHANGELOG.md is in this clone" >&2; exit 1; }
cache=${ANKUSA_PREVIOUS_CACHE:-$HOME/.cache/ankusa-previous}/$rev
if [[ ! -f $cache/out/ankusa-store || ! -f $cache/out/ankusa_filter.wasm ]]; then
  say "building $want ($rev) in $cache"
  rm -rf "$cache/src"
  mkdir -p "$cache/src" "$cache/out"
  git archive "$rev" | tar -x -C "$cache/src"
  (
    cd "$cache/src"
    export CARGO_TARGET_DIR=$cache/target
    cargo build -q --locked -p ankusa-store --bin ankusa-store
    cargo build -q --locked --release -p ankusa-filter --target wasm32-wasip1
  )
  cp "$cache/target/debug/ankusa-store" "$cache/target/wasm32-wasip1/release/ankusa_filter.wasm" "$cache/out/"
fi
say "previous release $want: $cache/out"

say "building this release"
cargo build -q --workspace --bins
cargo build -q --release -p ankusa-filter --target wasm32-wasip1
say "running the mixes"
ANKUSA_PREVIOUS_RELEASE=$cache/out cargo test -q -p ankusa-tests --test e2e mixed_versions:: -- --nocapture --test-threads=1 2>&1 |
  tee "${TMPDIR:-/tmp}/ankusa-mixed.log" | grep -E '^(MIXED|test result|thread|SKIPPED)|panicked' || true
grep -q "test result: ok. 6 passed" "${TMPDIR:-/tmp}/ankusa-mixed.log" || {
  echo "mixed-versions: a mix broke a promise (the log: ${TMPDIR:-/tmp}/ankusa-mixed.log)" >&2
  exit 1
}
