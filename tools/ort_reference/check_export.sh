#!/usr/bin/env bash
# Exports an inference model from ontrain (10 AdamW steps on tests/data/ort_mlp), runs it in ONNX Runtime
# (onnxruntime-node) and in ontrain on the same input, and prints the largest relative difference of the
# outputs. Writes ONNX Runtime's outputs to tests/data/ort_mlp/export_reference.txt, which
# tests/engine/mlp_fixture_test.cc compares against ontrain's own run of the same export.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"
[ -d node_modules/onnxruntime-node ] || npm install --no-audit --no-fund --ignore-scripts >/dev/null
work="$(mktemp -d /tmp/ontrain_export_XXXXXX)"
trap 'rm -rf "$work"' EXIT
(cd "$repo" && bazel run //tools:export_fixture -- "$repo/tests/data/ort_mlp" "$work/inference.onnx") \
  > "$work/ontrain.txt" 2>/dev/null
node run_inference.js "$work/inference.onnx" input 10 > "$work/ort.txt"
{
  echo "# onnxruntime-node's logits of ontrain's exported tests/data/ort_mlp model (tools/ort_reference/check_export.sh)"
  cat "$work/ort.txt"
} > "$repo/tests/data/ort_mlp/export_reference.txt"
paste "$work/ontrain.txt" "$work/ort.txt" | awk '
  { d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; r = d / (m > 1e-6 ? m : 1e-6); if (r > worst) worst = r; n++ }
  END { printf "exported model: %d outputs, largest relative difference ontrain vs onnxruntime-node %.3g\n", n, worst;
        exit (n == 0 || worst > 1e-5) }'
