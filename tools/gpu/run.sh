#!/usr/bin/env bash
# Runs on the GPU machine (no Bazel there), from the repository root, with the bundle tools/gpu/pack.sh made
# (.gpu_bundle/bundle.tar.xz): the CUDA parity suite, then the benchmarks (ontrain on CUDA and on this
# machine's CPU, PyTorch on CUDA). Writes a few files to $OUT (the device tool brings back at most 8):
# nvidia-smi.txt, parity.log, parity_summary.txt, bench.txt, bench.jsonl. Works on a machine without a GPU
# too: every CUDA test then skips and says why, and the CUDA benchmarks say why they cannot run.
set -uo pipefail
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
B="$(mktemp -d)/bundle"
mkdir -p "$B"
tar -C "$B" -xJf "${BUNDLE:-.gpu_bundle/bundle.tar.xz}" || { echo "no bundle: run tools/gpu/pack.sh first"; exit 1; }

# 1. The GPU, and the CUDA libraries of this machine (cuBLAS 13 and cuDNN 9: the toolkit's, or PyTorch's).
(nvidia-smi 2>&1 || echo "nvidia-smi: not available") | tee "$OUT/nvidia-smi.txt" | head -15
libdirs=""
for pattern in 'libcublas.so.13' 'libcublasLt.so.13' 'libcudnn.so.9'; do
  f=$(find /usr/local/cuda*/lib* /opt /usr/lib -name "$pattern*" 2>/dev/null | head -1)
  [ -n "$f" ] && libdirs="$libdirs:$(dirname "$f")"
done
cudnn_dir=$(find / -path /proc -prune -o -name 'libcudnn_engines_precompiled.so.9*' -print 2>/dev/null | head -1)
[ -n "$cudnn_dir" ] && libdirs="$libdirs:$(dirname "$cudnn_dir")"
export LD_LIBRARY_PATH="$B/lib$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ONTRAIN_CUDA_PROVIDER="$B/lib/libontrain_cuda.so"
export ONTRAIN_ORT_ARTIFACTS="$B/ort-artifacts"
export TEST_TMPDIR="$(mktemp -d)"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# 2. Parity suite (from the workspace-root copy of the test data).
cd "$B/ontrain"
: > "$OUT/parity.log"
: > "$OUT/parity_summary.txt"
for t in op_parity_test training_parity_test dropout_test coverage_test; do
  "$B/bin/$t" --gtest_brief=0 >"$TEST_TMPDIR/$t.log" 2>&1
  rc=$?
  cat "$TEST_TMPDIR/$t.log" >> "$OUT/parity.log"
  {
    echo "== $t (exit $rc)"
    grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$TEST_TMPDIR/$t.log"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$TEST_TMPDIR/$t.log" | head -60
  } | tee -a "$OUT/parity_summary.txt"
done
grep -h -B1 -A6 'Failure$' "$TEST_TMPDIR"/*.log | head -200 >> "$OUT/parity_summary.txt"

# 3. Benchmarks: ontrain on CUDA and on the CPU, PyTorch on CUDA, the same models, batches and optimizer.
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
gpu_model=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "no GPU") | head -1)
{
  echo "machine: $gpu_model; CPU $cpu_model ($(nproc) cores)"
  : > "$OUT/bench.jsonl"
  for m in $(python3 -c "import json; print(' '.join(json.load(open('$B/bench/models.json'))))"); do
    batch=$(python3 -c "import json; print(json.load(open('$B/bench/models.json'))['$m']['batch'])" 2>/dev/null || echo 64)
    for p in cuda cpu; do
      steps=200
      [ "$p" = cpu ] && steps=20
      "$B/bin/ontrain" bench --artifacts "$B/bench/$m/artifacts" --provider "$p" --batch-size "$batch" \
        --steps "$steps" --warmup 10 --json "$TEST_TMPDIR/b.json" 2>&1 && cat "$TEST_TMPDIR/b.json" >> "$OUT/bench.jsonl"
    done
  done
  python3 "$B/bench_models.py" torch "$B/bench" 200 2>&1 | tee -a "$OUT/bench.jsonl"
} 2>&1 | tee "$OUT/bench.txt"
echo "results in $OUT"
