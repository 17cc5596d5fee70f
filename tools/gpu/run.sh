#!/usr/bin/env bash
# Runs on the GPU machine (no Bazel there), from the repository root, with the bundle tools/gpu/pack.sh made
# (.gpu_bundle/bundle.tar.xz): the CUDA parity suite, then the benchmarks (ontrain on CUDA and on this
# machine's CPU, PyTorch on CUDA). Writes a few files to $OUT (the device tool brings back at most 8):
# nvidia-smi.txt, parity.log, parity_summary.txt, bench.txt, bench.jsonl. Works on a machine without a GPU
# too: every CUDA test then skips and says why, and the CUDA benchmarks say why they cannot run.
#
# Environment: STEPS="parity bench" (either or both; "cpu" adds the CPU benchmark against this machine's
# PyTorch on two pinned cores: CPU_MODELS, CPU_STEPS, CPU_CORES), PARITY_TESTS (the test binaries), DEADLINE (seconds the
# whole script may take, default 560: the device tool stops a command at 600), SANITIZE=N (rerun the first N
# faulting cases under compute-sanitizer), GTEST_FILTER_<test> (a filter replacing the default one),
# BENCH_MODELS and BENCH_STEPS (a subset of the benchmark models, fewer CUDA steps), CUDA_PROVIDER_LIB (another
# provider library: libontrain_cuda_emu.so rehearses this script on a machine without a GPU, see
# tools/gpu/rehearse.sh).
set -uo pipefail
START=$SECONDS
DEADLINE=${DEADLINE:-560}
left() {  # seconds left before the deadline, at most $1
  local l=$((DEADLINE - (SECONDS - START)))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 1 ] && l=1
  echo "$l"
}
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
B="$(mktemp -d)/bundle"
mkdir -p "$B"
tar -C "$B" -xJf "${BUNDLE:-.gpu_bundle/bundle.tar.xz}" || { echo "no bundle: run tools/gpu/pack.sh first"; exit 1; }

# 1. The GPU, and the CUDA libraries of this machine (cuBLAS 13 and cuDNN 9: the toolkit's, or PyTorch's).
(nvidia-smi 2>&1 || echo "nvidia-smi: not available") | tee "$OUT/nvidia-smi.txt" | head -15
libdirs=""
roots="/usr/local/cuda /usr/local/cuda-13.0 /opt /usr/lib/x86_64-linux-gnu"
for pattern in 'libcublas.so.13' 'libcublasLt.so.13' 'libcudnn.so.9' 'libcudnn_engines_precompiled.so.9'; do
  f=$(find $roots -name "$pattern*" 2>/dev/null | sort | head -1)
  echo "found $pattern: ${f:-none}"
  [ -n "$f" ] && case ":$libdirs:" in *":$(dirname "$f"):"*) ;; *) libdirs="$libdirs:$(dirname "$f")" ;; esac
done
export LD_LIBRARY_PATH="$B/lib$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ONTRAIN_CUDA_PROVIDER="${CUDA_PROVIDER_LIB:-$B/lib/libontrain_cuda.so}"
export ONTRAIN_ORT_ARTIFACTS="$B/ort-artifacts"
export TEST_TMPDIR="$(mktemp -d)"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# 2. Parity suite (from the workspace-root copy of the test data), through run_gtest.py: batches of cases, one
# process each, so that a case ending in a sticky CUDA fault or a crash is named and the cases after it still
# run. The simulated-device halves of these binaries run in CI and are left out here.
cd "$B/ontrain"
: > "$OUT/parity.log"
: > "$OUT/parity_summary.txt"
declare -A FILTER=(
  [op_parity_test]='Ops/OpParityTest.*:OpParityCoverage.*'
  [training_parity_test]='*Cuda*'
  [dropout_test]='*'
  [coverage_test]='*'
)
mkdir -p "$TEST_TMPDIR/cases"
for t in ${PARITY_TESTS:-op_parity_test training_parity_test dropout_test coverage_test}; do
  [[ " ${STEPS:-parity bench} " == *" parity "* ]] || break
  echo "== $t ($((SECONDS - START)) s in)" | tee -a "$OUT/parity_summary.txt"
  var="GTEST_FILTER_$t"
  timeout "$(left 300)" python3 "$B/run_gtest.py" "$B/bin/$t" --filter "${!var:-${FILTER[$t]}}" \
    --batch "${PARITY_BATCH:-400}" --timeout 200 --log "$OUT/parity.log" --json "$TEST_TMPDIR/cases/$t.json" \
    --sanitize "${SANITIZE:-0}" 2>&1 | tee -a "$OUT/parity_summary.txt"
  tar -C "$TEST_TMPDIR" -czf "$OUT/cases.tar.gz" cases
done

# 3. Benchmarks: ontrain on CUDA (graph capture on and off) and on the CPU, PyTorch on CUDA (the same models,
# batches and optimizer), then a per-op profile of each CUDA step.
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
gpu_model=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "no GPU") | head -1)
models=${BENCH_MODELS:-$(python3 -c "import json; print(' '.join(json.load(open('$B/bench/models.json'))))")}
batch_of() { python3 -c "import json; print(json.load(open('$B/bench/models.json'))['$1']['batch'])" 2>/dev/null || echo 64; }
[[ " ${STEPS:-parity bench} " == *" bench "* ]] && {
  echo "machine: $gpu_model; CPU $cpu_model ($(nproc) cores)"
  : > "$OUT/bench.jsonl"
  for m in $models; do
    batch=$(batch_of "$m")
    # CUDA with graph capture (the default) and without, the convolutional models also with cuDNN's
    # algorithms timed (--nondeterministic, PyTorch's cudnn.benchmark), then the CPU.
    variants="cuda cuda:eager cpu"
    case "$m" in cnn|resnet|mobilenet) variants="cuda cuda:eager cuda:nondet cpu" ;; esac
    for p in $variants; do
      steps=${BENCH_STEPS:-200}
      [ "$p" = cpu ] && steps=20
      flags=""
      [ "$p" = cuda:eager ] && flags="--no-graph-capture"
      [ "$p" = cuda:nondet ] && flags="--nondeterministic"
      [ "$(left 600)" -lt 40 ] && { echo "deadline: $m on $p not run"; continue; }
      timeout "$(left 120)" "$B/bin/ontrain" bench --artifacts "$B/bench/$m/artifacts" --provider "${p%:*}" \
        --batch-size "$batch" --steps "$steps" --warmup 10 $flags --json "$TEST_TMPDIR/b.json" 2>&1 \
        && cat "$TEST_TMPDIR/b.json" >> "$OUT/bench.jsonl"
    done
  done
  timeout "$(left 300)" python3 "$B/bench_models.py" torch "$B/bench" "${BENCH_STEPS:-200}" 2>&1 | tee -a "$OUT/bench.jsonl"
  # Where the CUDA step's time goes: kernel time per op type, the device drained around each kernel.
  for m in $models; do
    batch=$(batch_of "$m")
    [ "$(left 600)" -lt 60 ] && { echo "deadline: $m not profiled"; continue; }
    echo "== profile: $m on cuda"
    timeout "$(left 60)" "$B/bin/ontrain" bench --artifacts "$B/bench/$m/artifacts" --provider cuda \
      --batch-size "$batch" --steps "${BENCH_STEPS:-50}" --warmup 5 --profile 2>&1 | head -30
  done
} 2>&1 | tee "$OUT/bench.txt"

# 4. The CPU benchmark on this machine's CPU (not the CUDA provider's): ontrain's CPU provider against this
# machine's PyTorch on the CPU at 1 and 2 threads, both pinned to the same two cores (the build machine's
# count), at the CPU benchmark's batches, interleaved per model and thread count. Only with STEPS containing
# "cpu" (it is not in the default). PYTHON: the interpreter with PyTorch (default python3).
[[ " ${STEPS:-parity bench} " == *" cpu "* ]] && {
  cores=${CPU_CORES:-0,1}
  isa=$(grep -m1 '^flags' /proc/cpuinfo | grep -qw avx512f && echo AVX-512 || echo "no AVX-512")
  echo "CPU benchmark: $cpu_model ($(nproc) cores, $isa), pinned to cores $cores"
  : > "$OUT/cpu.jsonl"
  cpu_batch_of() { python3 -c "import json; print(json.load(open('$B/bench/models.json'))['$1']['cpu_batch'])"; }
  for m in ${CPU_MODELS:-$models}; do
    batch=$(cpu_batch_of "$m") || { echo "$m: no cpu_batch in models.json"; continue; }
    for t in 1 2; do
      [ "$(left 600)" -lt 30 ] && { echo "deadline: $m at $t threads not run"; continue; }
      timeout "$(left 90)" taskset -c "$cores" "$B/bin/ontrain" bench --artifacts "$B/bench/$m/artifacts" --provider cpu \
        --threads "$t" --batch-size "$batch" --steps "${CPU_STEPS:-100}" --json "$TEST_TMPDIR/c.json" > "$TEST_TMPDIR/c.txt" 2>&1 \
        && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r=r[0] if isinstance(r,list) else r; r['model']=sys.argv[2]; print(json.dumps(r))" \
           "$TEST_TMPDIR/c.json" "$m" | tee -a "$OUT/cpu.jsonl" || { echo "ontrain $m $t threads failed:"; tail -3 "$TEST_TMPDIR/c.txt"; }
      OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t timeout "$(left 90)" taskset -c "$cores" \
        "${PYTHON:-python3}" "$B/bench_models.py" cpu "$m" "$t" "${CPU_STEPS:-100}" 2>&1 | tail -1 | tee -a "$OUT/cpu.jsonl"
    done
  done
  python3 - "$OUT/cpu.jsonl" <<'PY'
import json, sys
ours, theirs = {}, {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    key = (r.get("model") or r.get("workload"), r.get("threads"))
    (theirs if str(r.get("engine", "")).startswith("pytorch") else ours)[key] = r.get("steps_per_s")
for key in sorted(ours, key=str):
    if key in theirs and ours[key] and theirs[key]:
        print("%-12s %d thread(s): ontrain %8.1f steps/s, PyTorch %8.1f, ratio %.2f" %
              (key[0], key[1], ours[key], theirs[key], ours[key] / theirs[key]))
PY
} 2>&1 | tee "$OUT/cpu.txt"
echo "results in $OUT ($((SECONDS - START)) s)"
