#!/usr/bin/env bash
# ontrain's test command: installs what is missing, runs every Bazel test, then builds and tests
# tests/external_workspace (a project that depends on ontrain exactly as the README says), then fuzzes every
# tests/fuzz target for 20 seconds under clang with ASan and UBSan (tools/fuzz.sh smoke), and prints one
# closing line "N passed, N failed, N skipped" counting individual gtest cases of all three. Extra arguments
# go to the main `bazel test` (e.g. tools/test.sh --config=asan). Exits non-zero on any failure or build
# error.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# ONNX Runtime's own artifact sets (test inputs kept beside the project, never in it); tests that need them
# skip and say so when they are absent.
extra=()
if [ -d ../shared/ort-artifacts ]; then
  extra+=("--test_env=ONTRAIN_ORT_ARTIFACTS=$(cd ../shared/ort-artifacts && pwd)")
fi

# Under AddressSanitizer, LeakSanitizer skips what Open MPI and CPython keep for the life of the process
# (a path in .bazelrc cannot name this checkout).
for a in "$@"; do
  [ "$a" = "--config=asan" ] && extra+=("--test_env=LSAN_OPTIONS=suppressions=$(pwd)/tools/sanitizers/lsan.supp")
done

bep="$(mktemp -t ontrain-bep.XXXXXX)"
bep_external="$(mktemp -t ontrain-bep-external.XXXXXX)"
log_external="$(mktemp -t ontrain-external.XXXXXX)"
bep_fuzz="$(mktemp -t ontrain-bep-fuzz.XXXXXX)"
log_fuzz="$(mktemp -t ontrain-fuzz.XXXXXX)"
trap 'rm -f "$bep" "$bep_external" "$log_external" "$bep_fuzz" "$log_fuzz"' EXIT
bazel test //... --build_event_json_file="$bep" "${extra[@]}" "$@"
rc=$?

# The README's "Depending on ontrain from another Bazel workspace", as a user would: no flags.
echo "tests/external_workspace: building ontrain from another workspace (log: only on failure)"
(cd tests/external_workspace && bazel test //... --build_event_json_file="$bep_external") >"$log_external" 2>&1
ext_rc=$?
if [ $ext_rc -ne 0 ]; then
  grep -v "linux-sandbox" "$log_external" | tail -60
  rc=$((rc == 0 ? 1 : rc))
fi

# Every fuzz target, briefly, from its corpus: each change is fuzzed a little (docs/reliability.md).
echo "tests/fuzz: building the fuzz targets with clang and fuzzing each for 20 s (log: only on failure)"
tools/fuzz.sh smoke "$bep_fuzz" >"$log_fuzz" 2>&1
fuzz_rc=$?
if [ $fuzz_rc -ne 0 ]; then
  grep -v "linux-sandbox" "$log_fuzz" | tail -60
  rc=$((rc == 0 ? 1 : rc))
fi

/usr/bin/python3 tools/count_tests.py "$bep" "$bep_external" "$bep_fuzz"
count_rc=$?
if [ $rc -eq 0 ] && [ $count_rc -ne 0 ]; then rc=1; fi
if [ $rc -eq 4 ]; then rc=1; fi  # "no tests" is a failure here
exit $rc
