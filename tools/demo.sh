#!/usr/bin/env bash
# ontrain's main job: installs what is missing, builds, generates training artifacts for a built-in
# Fashion-MNIST classifier with ontrain's own autodiff (no Python, no PyTorch), trains it on Debian's
# Fashion-MNIST, prints test accuracy after every epoch, saves a checkpoint and exports an inference model.
# Usage: tools/demo.sh [--model mlp|cnn]   (mlp: 1 epoch; cnn: 3 epochs)
set -euo pipefail
cd "$(dirname "$0")/.."

model=mlp
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    *) echo "usage: tools/demo.sh [--model mlp|cnn]" >&2; exit 2 ;;
  esac
done
case "$model" in
  mlp) epochs=1; lr=3e-3 ;;
  cnn) epochs=3; lr=2e-3 ;;
  *) echo "unknown model '$model' (mlp or cnn)" >&2; exit 2 ;;
esac

tools/setup.sh
bazel build //tools:ontrain
ontrain=.bazel/bin/tools/ontrain
out="${ONTRAIN_DEMO_DIR:-/tmp/ontrain-demo}/$model"
rm -rf "$out"
"$ontrain" generate --builtin "$model" --out "$out" --extra-outputs logits
"$ontrain" train --artifacts "$out" --data fashion-mnist --eval-data fashion-mnist:test --epochs "$epochs" \
  --batch-size 64 --lr "$lr" --scheduler cosine --warmup 50 --seed 0 \
  --metrics "$out/run/metrics.jsonl" --export "$out/run/inference.onnx" --export-outputs logits
echo "artifacts are in $out; the trained checkpoint, metrics (JSON lines, CSV, SVG chart) and inference model in $out/run"
