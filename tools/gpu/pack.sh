#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run ontrain's CUDA parity suite and benchmarks into
# .gpu_bundle/bundle.tar.xz (ignored by git; about 15 MiB, well under the device tool's 64 MiB), so one
# `device` run does it all. On this machine:
#
#   tools/gpu/pack.sh
#
# then, through the device tool: run(command="bash tools/gpu/run.sh", carry=[".gpu_bundle"]).
#
# The bundle holds statically linked test binaries, the ontrain CLI, libontrain_cuda.so, the Debian shared
# libraries those need that the GPU machine lacks (it has its own glibc, libstdc++, cuBLAS and cuDNN), the
# test data, ONNX Runtime's artifact sets, and the benchmark models (exported here with PyTorch 1.13 and
# made into training artifacts with `ontrain generate`).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=.gpu_bundle
B="$(mktemp -d)/bundle"
TESTS=(op_parity_test training_parity_test dropout_test coverage_test)

exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx "/$OUTDIR/" "$exclude" 2>/dev/null || echo "/$OUTDIR/" >> "$exclude"
mkdir -p "$B/bin" "$B/lib" "$B/ontrain/tests/data" "$B/bench"

# 1. Binaries: static except for system libraries, stripped.
targets=(//providers/cuda:libontrain_cuda.so //tools:ontrain)
for t in "${TESTS[@]}"; do targets+=("//tests/parity:$t"); done
bazel build --dynamic_mode=off --strip=always "${targets[@]}"
bin="$(bazel info bazel-bin 2>/dev/null)"
for t in "${TESTS[@]}"; do cp "$bin/tests/parity/$t" "$B/bin/"; done
cp "$bin/tools/ontrain" "$B/bin/"
cp "$bin/providers/cuda/libontrain_cuda.so" "$B/lib/"

# 2. Shared libraries from Debian that the binaries need (not glibc, libstdc++, libgcc, nor CUDA's own).
for f in "$B"/bin/* "$B/lib/libontrain_cuda.so"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda' \
  | while read -r lib; do cp -L "$lib" "$B/lib/"; done
# ...and the CPU GEMM library the CPU provider loads at run time (oneDNN and its OpenMP runtime), so the CPU
# figures on the GPU machine use the same kernels as here.
for lib in libdnnl.so.2 libgomp.so.1; do
  f="/usr/lib/x86_64-linux-gnu/$lib"
  [ -e "$f" ] && cp -L "$f" "$B/lib/"
done

# 3. Data the tests read (relative to the workspace root, as in Bazel's runfiles).
cp -r tests/data/torch tests/data/optimizer_models tests/data/ort_mlp "$B/ontrain/tests/data/"
if [ -d ../shared/ort-artifacts ]; then
  mkdir -p "$B/ort-artifacts"
  for s in ort-testdata-mlp carzh-web-mnist srij-lora srij-transformer-lora seizureguard-cnn1d; do
    [ -d "../shared/ort-artifacts/$s" ] && cp -r "../shared/ort-artifacts/$s" "$B/ort-artifacts/"
  done
fi

# 4. Benchmark models: exported by PyTorch here, artifacts made by ontrain (AdamW as PyTorch's).
if ! /usr/bin/python3 -c "import torch, onnx" 2>/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get install -y python3-torch python3-onnx >/dev/null
fi
/usr/bin/python3 tools/gpu/bench_models.py export "$B/bench"
for m in $(/usr/bin/python3 -c "import json; print(' '.join(json.load(open('$B/bench/models.json'))))"); do
  "$B/bin/ontrain" generate --model "$B/bench/$m/forward.onnx" --out "$B/bench/$m/artifacts" \
    --eps 1e-8 --weight-decay 0.01 --adam-mode 0 >/dev/null
  rm "$B/bench/$m/forward.onnx"
done

# 5. One compressed file; tools/gpu/run.sh (which travels with the working tree) unpacks and runs it.
cp tools/gpu/bench_models.py tools/gpu/run_gtest.py tools/bench_modules.py tools/bench_workloads.py "$B/"
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
tar -C "$B" -cJf "$OUTDIR/bundle.tar.xz" .
rm -rf "$(dirname "$B")"
du -sh "$OUTDIR/bundle.tar.xz"
echo "now: run(command=\"bash tools/gpu/run.sh\", carry=[\"$OUTDIR\"])"
