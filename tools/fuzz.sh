#!/usr/bin/env bash
# ontrain's fuzzing (tests/fuzz, docs/reliability.md). libFuzzer needs clang, and a different compiler is a
# different C++ toolchain for Bazel, so everything here builds under --config=fuzz in an output base of its
# own (the ordinary build keeps its cache).
#
#   tools/fuzz.sh smoke [BEP_FILE]      every target for its test's seconds (20) from the checked-in corpus;
#                                       the README's test command runs this
#   tools/fuzz.sh campaign MINUTES [TARGET...]
#                                       each target (default: all) for MINUTES, one after another, with a
#                                       corpus kept between campaigns and LeakSanitizer on; prints a table of
#                                       executions, coverage and crashes, and appends it to the log below
#   tools/fuzz.sh shutdown              stops the fuzz build's Bazel server
#
# Campaign state lives in $ONTRAIN_FUZZ_HOME (default ~/.cache/ontrain-fuzz-campaign): <target>/corpus,
# <target>/crashes, <target>/log, and campaigns.tsv. A crash found becomes a regression test by copying
# it to tests/fuzz/regressions/<target>/.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
base="${XDG_CACHE_HOME:-$HOME/.cache}/ontrain-fuzz-$(printf '%s' "$root" | md5sum | cut -c1-12)"
bazel_fuzz() { bazel --output_base="$base" "$@"; }
targets_all=(model_fuzzer external_data_fuzzer checkpoint_fuzzer npz_fuzzer idx_fuzzer csv_fuzzer generate_fuzzer session_fuzzer)

if ! command -v clang-14 >/dev/null; then
  echo "fuzz: clang-14 is not installed (tools/setup.sh installs it with libfuzzer-14-dev)" >&2
  exit 1
fi

case "${1:-}" in
  smoke)
    bep=()
    [ -n "${2:-}" ] && bep=(--build_event_json_file="$2")
    bazel_fuzz test --config=fuzz //tests/fuzz:all "${bep[@]}" 2>&1 | grep -v "Cannot export local symbol"
    exit "${PIPESTATUS[0]}"
    ;;
  campaign)
    minutes="${2:?usage: tools/fuzz.sh campaign MINUTES [TARGET...]}"
    shift 2
    targets=("$@")
    [ ${#targets[@]} -eq 0 ] && targets=("${targets_all[@]}")
    home="${ONTRAIN_FUZZ_HOME:-$HOME/.cache/ontrain-fuzz-campaign}"
    mkdir -p "$home"
    labels=()
    for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
    bazel_fuzz build --config=fuzz "${labels[@]}" 2>&1 | grep -v "Cannot export local symbol" | tail -2
    bin="$(bazel_fuzz info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"
    cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    [ -f "$home/campaigns.tsv" ] || printf 'date\tcommit\tcpu\ttarget\tseconds\texecutions\tcoverage\tfeatures\tcorpus\tcrashes\n' >"$home/campaigns.tsv"
    # ONNX Runtime's artifact sets, where this machine has them, seed the model, checkpoint and session targets.
    shared_dir="$root/../shared/ort-artifacts"
    if [ -d "$shared_dir" ]; then
      /usr/bin/python3 tools/make_fuzz_corpus.py --shared "$shared_dir" --out "$home/shared-seeds" >/dev/null
    fi
    printf '%-22s %8s %12s %9s %9s %7s %8s\n' target seconds executions coverage features corpus crashes
    for t in "${targets[@]}"; do
      d="$home/$t"
      mkdir -p "$d/corpus" "$d/crashes"
      before=$(ls "$d/crashes" | wc -l)
      start=$(date +%s)
      # -fork keeps fuzzing after a crash (each crash is saved and the run goes on).
      ASAN_OPTIONS="detect_leaks=1" "$bin/$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time=$((minutes * 60)) -timeout=30 -rss_limit_mb=3072 -print_final_stats=1 \
        -artifact_prefix="$d/crashes/" "$d/corpus" "tests/fuzz/corpus/$t" \
        $( [ -d "tests/fuzz/regressions/$t" ] && echo "tests/fuzz/regressions/$t" ) \
        $( [ -d "$home/shared-seeds/$t" ] && echo "$home/shared-seeds/$t" ) >"$d/log" 2>&1
      secs=$(( $(date +%s) - start ))
      execs=$(grep -oE '#[0-9]+' "$d/log" | tail -1 | tr -d '#')
      cov=$(grep -oE 'cov: [0-9]+' "$d/log" | tail -1 | cut -d' ' -f2)
      ft=$(grep -oE 'ft: [0-9]+' "$d/log" | tail -1 | cut -d' ' -f2)
      corpus=$(ls "$d/corpus" | wc -l)
      crashes=$(( $(ls "$d/crashes" | wc -l) - before ))
      printf '%-22s %8s %12s %9s %9s %7s %8s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$(git rev-parse --short HEAD)" "$cpu" "$t" \
        "$secs" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes" >>"$home/campaigns.tsv"
    done
    echo "crash inputs: $home/<target>/crashes; history: $home/campaigns.tsv"
    ;;
  shutdown)
    bazel_fuzz shutdown >/dev/null 2>&1 || true
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
