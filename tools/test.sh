#!/usr/bin/env bash
# ontrain's test command: installs what is missing, runs every Bazel test, and prints one closing line
# "N passed, N failed, N skipped" counting individual gtest cases. Extra arguments go to `bazel test`
# (e.g. tools/test.sh --config=asan). Exits non-zero on any failure or build error.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# ONNX Runtime's own artifact sets (test inputs kept beside the project, never in it); tests that need them
# skip and say so when they are absent.
extra=()
if [ -d ../shared/ort-artifacts ]; then
  extra+=("--test_env=ONTRAIN_ORT_ARTIFACTS=$(cd ../shared/ort-artifacts && pwd)")
fi

bep="$(mktemp -t ontrain-bep.XXXXXX)"
trap 'rm -f "$bep"' EXIT
bazel test //... --build_event_json_file="$bep" "${extra[@]}" "$@"
rc=$?

/usr/bin/python3 tools/count_tests.py "$bep"
count_rc=$?
if [ $rc -eq 0 ] && [ $count_rc -ne 0 ]; then rc=1; fi
if [ $rc -eq 4 ]; then rc=1; fi  # "no tests" is a failure here
exit $rc
