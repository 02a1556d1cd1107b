#!/usr/bin/env bash
# Mutation testing of the code that decides (docs/mutants.md): signatures, GCRA, limits, the
# breaker, node buckets, event keys, the hook's admission and settle rules,
# the degraded share and the wire validation the store runs. Every mutant
# cargo-mutants makes of those files must fail a test of the core crate, or
# be argued equivalent in a comment at its line ("equivalent mutant: why").
#
#   bash scripts/mutants.sh                      # every file below
#   bash scripts/mutants.sh --file core/src/limit/gcra.rs   # extra cargo-mutants arguments
#   bash scripts/mutants.sh --iterate            # only the mutants not caught last time
#
# Prints the score and every survivor, each marked killed-or-argued; exits 1
# when a survivor is not argued. Output: target/mutants/mutants.out/.
# Tests run with --all-targets (doctests hold no assertion here), two
# mutants at a time (MUTANTS_JOBS). A test that loops until a state is
# reached is bounded, so a mutant that never reaches it fails, not hangs.
# Not part of scripts/test.sh (the full run takes about an hour on 2 cores);
# run it before calling a change to these files done.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
  echo "[mutants] cargo install --locked cargo-mutants@$VERSION"
  cargo install -q --locked "cargo-mutants@$VERSION"
fi

files=(
  'core/src/verify/*.rs'
  core/src/limit/gcra.rs
  core/src/limit/limits.rs
  core/src/limit/share.rs
  'core/src/fleet/breaker/*.rs'
  'core/src/node/node_buckets/*.rs'
  core/src/hook/event_key.rs
  core/src/hook/admit.rs
  core/src/hook/settle.rs
  'core/src/hook/settle/*.rs'
  core/src/hook/machine/upstream.rs
  core/src/wire.rs
  'core/src/wire/*.rs'
)
args=()
# Every file above, unless the caller names its own (`--file`).
if [[ " $* " != *" --file "* ]]; then
  for f in "${files[@]}"; do args+=(--file "$f"); done
fi

out=target/mutants
mkdir -p "$out"
started=$SECONDS
status=0
cargo mutants --package ankusa-core "${args[@]}" "$@" \
  --exclude '**/tests.rs' --exclude '**/*_tests.rs' \
  --output "$out" --timeout-multiplier 3 --minimum-test-timeout 20 \
  --jobs "${MUTANTS_JOBS:-2}" --cargo-test-arg=--all-targets || status=$?
# 0: every mutant caught; 2: some missed; 3: some timed out (a hang is caught,
# not a pass: cargo-mutants counts it as caught only in the timeout file).
if ((status != 0 && status != 2 && status != 3)); then
  echo "[mutants] cargo mutants failed (exit $status)" >&2
  exit "$status"
fi

dir="$out/mutants.out"
count() { if [[ -f "$dir/$1" ]]; then grep -c . "$dir/$1" || true; else echo 0; fi; }
caught=$(count caught.txt); missed=$(count missed.txt); timeout=$(count timeout.txt); unviable=$(count unviable.txt)
tested=$((caught + missed + timeout))
printf '\n[mutants] %s mutants tested in %ss: %s caught, %s timed out (caught by the bound), %s missed; %s unviable\n' \
  "$tested" "$((SECONDS - started))" "$caught" "$timeout" "$missed" "$unviable"
if ((tested > 0)); then
  awk -v c="$caught" -v t="$timeout" -v n="$tested" 'BEGIN { printf "[mutants] score %.1f %%\n", 100 * (c + t) / n }'
fi

unargued=0
if ((missed > 0)); then
  echo "[mutants] survivors:"
  while IFS= read -r line; do
    file=${line%%:*}; rest=${line#*:}; at=${rest%%:*}
    # An argument sits on the mutated line or the line above it.
    if sed -n "$((at > 1 ? at - 1 : 1)),${at}p" "$file" | grep -q 'equivalent mutant:'; then
      echo "  argued equivalent  $line"
    else
      echo "  NOT KILLED         $line"
      unargued=$((unargued + 1))
    fi
  done < "$dir/missed.txt"
fi
if ((unargued > 0)); then
  echo "[mutants] $unargued survivor(s) neither killed nor argued equivalent" >&2
  exit 1
fi
echo "[mutants] no survivor left unargued"
