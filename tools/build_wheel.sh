#!/usr/bin/env bash
# Builds the ontrain Python wheel offline: the extension with Bazel (-c opt), then tools/build_wheel.py.
# Usage: tools/build_wheel.sh [OUT_DIR]   (default dist/); install with
#   pip install --no-index dist/ontrain-*.whl     (numpy must be present: Debian's python3-numpy, or a
#                                                   virtual environment made with --system-site-packages)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
tools/setup.sh
bazel build -c opt //bindings/python:ontrain/_ontrain.so
/usr/bin/python3 tools/build_wheel.py --extension bazel-out/k8-opt/bin/bindings/python/ontrain/_ontrain.so \
  --package bindings/python/ontrain --out "$out"
