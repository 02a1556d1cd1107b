#!/usr/bin/env bash
# Every check the project has, in the order a failure is cheapest to read:
# formatting, lints (native and as the wasm32-wasip1 filter), the builds the
# integration tests launch (the native module too), the core's tests natively
# and compiled to wasm under Node, then every test against real Redis, the real
# store and real Envoy, the edge's ones again through the native module,
# then the Compose stack on the Docker engine (scripts/compose-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh

started=$SECONDS
step() { printf '\n== %s  (%ss)\n' "$*" "$((SECONDS - started))"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (native, all targets)"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo clippy (filter and the benchmark's floor filters as wasm32-wasip1)"
cargo clippy -p ankusa-filter -p ankusa-bench-noop -p ankusa-bench-callout --target wasm32-wasip1 -- -D warnings

step "promtool: alert rules, scrape config, dashboard queries"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml
promtool check config deploy/prometheus/prometheus.yml
cargo test -q -p ankusa-tests --test e2e dashboards::

step "deployment: Kubernetes manifests, CRD examples, embedded copies, the remote-fetch bootstrap"
bash scripts/check-deploy.sh

step "build: binaries, the filter, the benchmark's floor filters and the native module"
cargo build --workspace --bins
cargo build -p ankusa-filter -p ankusa-bench-noop -p ankusa-bench-callout --target wasm32-wasip1 --release
# panic = unwind: each exported hook catches a panic and fails closed. The
# release profile's (panic = abort) build is what tests/e2e/native.rs checks
# refuses to load.
cargo build -p ankusa-module --profile release-native
cargo build -p ankusa-module --release
# The benchmark's native floors, beside the module under a name of their own (tests/e2e/bench_floors.rs).
cargo build -p ankusa-module --profile release-floor --features floor
cp "${CARGO_TARGET_DIR:-target}/release-floor/libankusa_module.so" "${CARGO_TARGET_DIR:-target}/release-native/libankusa_floor.so"

step "core tests, native"
cargo test -p ankusa-core

step "core tests, wasm32-unknown-unknown under Node (wasm-bindgen-test)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p ankusa-core --target wasm32-unknown-unknown

step "store, filter, module, harness and end-to-end tests (real Redis, store, Envoy)"
cargo test --workspace --exclude ankusa-core --no-fail-fast

step "end-to-end tests through the native module (node and fleet scopes: the same tests, the shell a parameter)"
# The modules whose hooks pass through the edge's filter; the store's and the
# harness's own tests don't depend on the shell and run once above.
ANKUSA_SHELL=native cargo test -p ankusa-tests --test e2e --no-fail-fast -- \
  native:: edge_node:: edge_verify::each_scheme edge_verify::a_rotated_out edge_verify::no_secret \
  edge_quota::a_node_bytes_quota edge_rate_headers:: edge_reload::a_node_reload \
  edge_node_overrides::an_edge_without_a_store hostile::hostile_requests \
  edge_fleet:: edge_claims:: edge_batch:: edge_settle:: edge_fallback:: edge_share:: \
  edge_shadow:: edge_override_shadow:: edge_overrides:: access_log::every_decision \
  edge_shapes:: faults::

step "end-to-end fleet tests through the native module on its own store connection (fleet.connection \"direct\")"
ANKUSA_SHELL=native ANKUSA_CONNECTION=direct cargo test -p ankusa-tests --test e2e --no-fail-fast -- \
  native:: edge_fleet:: edge_claims:: edge_fallback:: edge_shapes::

step "compose: the stack built offline and run for real, the mock provider, the quick fault rows across hosts"
# Debug binaries in the images: the workspace build above already made them
# (scripts/compose-up.sh, for users, builds release ones).
ANKUSA_COMPOSE_PROFILE=debug bash scripts/compose-test.sh

step "all green"
