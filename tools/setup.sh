#!/usr/bin/env bash
# Installs every Debian package that ontrain's build, tests and demo need. Idempotent: when all are
# present it changes nothing and does not touch the network.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap        # Bazel 4.2.3
  libeigen3-dev          # CPU kernels
  libopenblas-dev        # float64 GEMM (OpenBLAS picks its kernels from the CPU at run time)
  libdnnl2               # float32 GEMM (oneDNN JIT-compiles its kernels for the CPU it runs on)
  libprotobuf-dev protobuf-compiler
  libonnx-dev            # ONNX 1.12: protos, checker, shape inference
  libonnx-testdata       # ONNX backend conformance data
  libflatbuffers-dev flatbuffers-compiler  # ONNX Runtime checkpoint format
  dataset-fashion-mnist  # the demo's training data
  python3                # tools/count_tests.py
  python3-dev pybind11-dev python3-numpy python3-pytest python3-onnx  # the Python bindings (bindings/python) and their tests
  python3-venv python3-pip  # installing the wheel (tools/build_wheel.sh) into a virtual environment, offline
  zlib1g-dev             # reading the gzip-compressed IDX dataset files
  libopenmpi-dev openmpi-bin  # data-parallel training (distributed/mpi) and its mpirun tests
  clang-14 libfuzzer-14-dev   # the fuzz targets (tests/fuzz, tools/fuzz.sh)
  librsvg2-bin           # rsvg-convert: the training chart's test renders it as a real SVG reader would
  mono-mcs mono-runtime  # the C# binding (bindings/csharp) and its test
  gobjc libgnustep-base-dev  # the Objective-C binding (bindings/objc) and its test, on GNUstep Foundation
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -o DPkg::Lock::Timeout=600 -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
echo "setup: done"
