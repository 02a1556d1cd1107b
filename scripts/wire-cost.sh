#!/usr/bin/env bash
# What the wire's JSON costs a fleet hook (core/tests/wire_cost.rs), natively
# and compiled to wasm32-wasip1 run by V8 under Node's WASI: the same engine
# Envoy runs the filter on. A benchmark: it prints figures and asserts none.
#
#   scripts/wire-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== native"
cargo test -q --release -p ankusa-core --test wire_cost -- --ignored --nocapture 2>&1 |
  grep -E 'µs|bytes'

echo "== wasm32-wasip1 under V8 (node $(node --version))"
built=$(cargo test --release -p ankusa-core --test wire_cost --target wasm32-wasip1 \
  --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*wire_cost[^"]*\.wasm\)".*/\1/p' | tail -1)
[ -n "$built" ] || { echo "wire-cost: the wasm32-wasip1 test binary was not built" >&2; exit 1; }
node --no-warnings --input-type=module -e '
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
const [file, ...args] = process.argv.slice(1);
const wasi = new WASI({ version: "preview1", args: [file, ...args], env: {}, preopens: {} });
const module = await WebAssembly.compile(await readFile(file));
wasi.start(await WebAssembly.instantiate(module, wasi.getImportObject()));
' "$built" --ignored --nocapture --test-threads=1 |
  sed 's/^test .* \.\.\. //' | grep -E 'µs|bytes'
