#!/usr/bin/env bash
# What the core's own work costs a hook, natively and compiled to
# wasm32-wasip1 run by V8 under Node's WASI (the engine Envoy runs the filter
# on): the store wire's JSON for a fleet hook (core/tests/wire_cost.rs) and a
# node hook's whole decision with no host around it (core/tests/hook_cost.rs).
# A benchmark: it prints figures and asserts none.
#
#   scripts/core-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."

FIGURES=(wire_cost hook_cost)

echo "== native"
for test in "${FIGURES[@]}"; do
  cargo test -q --release -p ankusa-core --test "$test" -- --ignored --nocapture 2>&1 |
    grep -E 'µs|bytes'
done

echo "== wasm32-wasip1 under V8 (node $(node --version))"
for test in "${FIGURES[@]}"; do
  built=$(cargo test --release -p ankusa-core --test "$test" --target wasm32-wasip1 \
    --no-run --message-format=json 2>/dev/null |
    sed -n "s/.*\"executable\":\"\([^\"]*${test}[^\"]*\.wasm\)\".*/\1/p" | tail -1)
  [ -n "$built" ] || { echo "core-cost: the wasm32-wasip1 build of $test was not made" >&2; exit 1; }
  node --no-warnings --input-type=module -e '
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
const [file, ...args] = process.argv.slice(1);
const wasi = new WASI({ version: "preview1", args: [file, ...args], env: {}, preopens: {} });
const module = await WebAssembly.compile(await readFile(file));
wasi.start(await WebAssembly.instantiate(module, wasi.getImportObject()));
' "$built" --ignored --nocapture --test-threads=1 |
    sed 's/^test .* \.\.\. //' | grep -E 'µs|bytes'
done
