#!/usr/bin/env bash
# `bazel run -c opt //tools:bench -- [workloads.py flags]`: the CPU reference workloads against PyTorch
# (tools/bench_workloads.py) with the ontrain binary Bazel just built. Installs PyTorch, ONNX and OpenBLAS
# from Debian when missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ontrain="$here/ontrain"
[ -x "$ontrain" ] || ontrain="$(find "${RUNFILES_DIR:-$0.runfiles}" -path '*tools/ontrain' -type f | head -1)"
script="$(find "${RUNFILES_DIR:-$0.runfiles}" -path '*tools/bench_workloads.py' | head -1)"
if ! /usr/bin/python3 -c "import torch, onnx" 2>/dev/null || ! dpkg-query -W libopenblas0-pthread >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-torch python3-onnx libopenblas0-pthread >/dev/null
fi
cd "${BUILD_WORKING_DIRECTORY:-.}"
exec /usr/bin/python3 "$script" --ontrain "$ontrain" "$@"
