#!/usr/bin/env bash
# Runs one fuzz target for a test (see fuzz.bzl): "fuzz" mode fuzzes for SECONDS from the seed corpus and the
# regression inputs, writing new inputs to a scratch corpus and any crash to the test's undeclared outputs;
# "replay" mode runs every seed and regression input once.
# Usage: run_fuzz_target.sh BINARY fuzz|replay SECONDS CORPUS_DIR REGRESSION_DIR
set -euo pipefail
bin="$1" mode="$2" seconds="$3" corpus="$4" regressions="$5"
dirs=("$corpus")
[ -d "$regressions" ] && dirs+=("$regressions")
if [ "$mode" = fuzz ]; then
  work="${TEST_TMPDIR:-/tmp}/corpus"
  out="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}"
  mkdir -p "$work"
  # detect_leaks=0: a fuzz input that ends in an error must not leak, but LeakSanitizer cannot run under
  # Bazel's sandbox on every kernel (ptrace); the long campaign (tools/fuzz.sh campaign) keeps it on.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" exec "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072 \
    -print_final_stats=1 -artifact_prefix="$out/" "$work" "${dirs[@]}"
fi
exec "$bin" "${dirs[@]}"
