#!/usr/bin/env bash
# Rehearses the GPU run on this machine, without a GPU: tools/gpu/run.sh on the packed bundle with the CUDA
# provider built over the emulated device (providers/cuda/host_emu) in place of libontrain_cuda.so, so the
# parts of run.sh and run_gtest.py that only a GPU used to reach (passing CUDA cases, CUDA benchmark rows and
# profiles, a case that faults) run here. Checks:
#   1. the parity suite passes on the emulated device (no case skipped for want of a device);
#   2. `ontrain bench --provider cuda` writes its rows and profiles (one small model and the CNN, a few
#      steps), the CNN also with cuDNN's algorithms timed (--nondeterministic);
#   3. with a fault injected into one kernel (ONTRAIN_CUDA_EMU_FAULT_AT), run_gtest.py names that case as a
#      fault and the cases after it still pass in a fresh process, and it reruns faulting cases alone with
#      CUDA_LAUNCH_BLOCKING=1;
#   4. a fault that recurs when its case runs alone is then named by its node.
# Usage: tools/gpu/rehearse.sh [OUT_DIR]   (packs the bundle first, so that what is rehearsed is what a GPU
# session would be sent)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
bash tools/gpu/pack.sh
bazel build -c opt //providers/cuda:libontrain_cuda_emu.so
emu="$(bazel info -c opt bazel-bin)/providers/cuda/libontrain_cuda_emu.so"
fail=0

echo "== 1, 2: run.sh on the emulated device"
CUDA_PROVIDER_LIB="$emu" OUT="$out/run" BENCH_MODELS="mlp_small cnn" BENCH_STEPS=3 DEADLINE=900 \
  bash tools/gpu/run.sh > "$out/run.log" 2>&1 || true
summary="$out/run/parity_summary.txt"
if grep -q "skipped\|SKIPPED" "$summary" && ! grep -Eq " 0 skipped" "$summary"; then
  grep -i "skip" "$summary" | head -5
fi
grep -E "passed|failed|fault|hang" "$summary" || true
if grep -Eq "[1-9][0-9]* (failed|faults?|hangs?)" "$summary"; then
  echo "rehearse: the parity suite did not pass on the emulated device"; fail=1
fi
if ! grep -q '"providers": "CUDA,CPU"' "$out/run/bench.jsonl"; then
  echo "rehearse: no CUDA benchmark row in bench.jsonl"; fail=1
fi
if ! grep '"providers": "CUDA,CPU"' "$out/run/bench.jsonl" | grep -q '"deterministic": false'; then
  echo "rehearse: no CUDA benchmark row with cuDNN's algorithms timed in bench.jsonl"; fail=1
fi
if ! grep -q "== profile: mlp_small on cuda" "$out/run/bench.txt" || ! grep -q "ms/step" "$out/run/bench.txt"; then
  echo "rehearse: no CUDA profile in bench.txt"; fail=1
fi

echo "== 3: a kernel fault in the middle of a batch"
B="$(mktemp -d)"
tar -C "$B" -xJf .gpu_bundle/bundle.tar.xz
filter='Ops/OpParityTest.*Relu*:Ops/OpParityTest.*Sigmoid*'
(cd "$B/ontrain" && ONTRAIN_CUDA_PROVIDER="$emu" ONTRAIN_CUDA_EMU_FAULT_AT=3 \
  python3 "$B/run_gtest.py" "$B/bin/op_parity_test" --filter "$filter" --batch 400 --timeout 200 \
  --json "$out/fault.json" --log "$out/fault.log") > "$out/fault.txt" 2>&1 || true
cat "$out/fault.txt" | tail -5
grep "^blocking " "$out/fault.txt" | head -3
if ! grep -q "^blocking " "$out/fault.txt"; then
  echo "rehearse: run_gtest.py did not rerun a faulting case with CUDA_LAUNCH_BLOCKING=1"; fail=1
fi
python3 - "$out/fault.json" <<'EOF' || fail=1
import json, sys
data = json.load(open(sys.argv[1]))
cases, faults = data["cases"], data["faults"]
ok = [n for n, c in cases.items() if c["result"] == "OK"]
others = [n for n, c in cases.items() if c["result"] != "OK" and n not in faults]
print(f"rehearse: {len(cases)} cases: {len(faults)} named as faults, {len(ok)} passed, {len(others)} other")
# Each process counts kernels from 1, so every fresh process faults at its third kernel: the driver must
# name the faulting case of each process and run every other case to a pass in the next one.
if not faults or not ok or others:
    sys.exit("rehearse: run_gtest.py did not isolate the injected faults: " + ", ".join(others[:5]))
EOF

echo "== 4: a fault that recurs in the case alone is named by its node under CUDA_LAUNCH_BLOCKING=1"
(cd "$B/ontrain" && ONTRAIN_CUDA_PROVIDER="$emu" ONTRAIN_CUDA_EMU_FAULT_AT=1 \
  python3 "$B/run_gtest.py" "$B/bin/op_parity_test" --filter 'Ops/OpParityTest.*/Relu_float32_3x5x4' \
  --batch 400 --timeout 200 --blocking 1 --log "$out/blocking.log") > "$out/blocking.txt" 2>&1 || true
grep "^blocking " "$out/blocking.txt" || true
if ! grep -q '^blocking .*node ".*cudaErrorIllegalAddress' "$out/blocking.txt"; then
  echo "rehearse: the blocking rerun did not name the faulting node"; fail=1
fi
rm -rf "$B"
[ $fail -eq 0 ] && echo "rehearse: ok (results in $out)" || echo "rehearse: FAILED (results in $out)"
exit $fail
