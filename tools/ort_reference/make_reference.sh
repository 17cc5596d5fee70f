#!/usr/bin/env bash
# Regenerates tests/data/ort_reference_losses.txt: ONNX Runtime 1.19.2's training engine on the artifact
# sets of ../shared/ort-artifacts, tests/data/ort_mlp and the artifacts `ontrain generate` makes for its
# built-in MLP and CNN and for the PyTorch fixture models, and on the built-in MLP with each optimizer model
# of tests/data/optimizer_models (tools/make_optimizer_models.py), all listed in sets.json: 20 optimizer
# steps each, then the eval loss on the next batch. Needs node/npm and
# /usr/bin/python3 with python3-onnx; the tests only read the output file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
artifacts="${1:-$repo/../shared/ort-artifacts}"
cd "$here"
[ -d node_modules/onnxruntime-web ] || npm install --no-audit --no-fund --ignore-scripts >/dev/null
work="$(mktemp -d /tmp/ontrain_ref_XXXXXX)"  # no dot in the path: flatc cuts names at the last one
trap 'rm -rf "$work"' EXIT
for name in $(/usr/bin/python3 -c "import json;print(' '.join(s['name'] for s in json.load(open('sets.json'))['sets']))"); do
  zero=$(/usr/bin/python3 -c "import json;print(','.join(next(s for s in json.load(open('sets.json'))['sets'] if s['name']=='$name').get('zero_dropout',[])))")
  src=$(/usr/bin/python3 -c "import json;print(next(s for s in json.load(open('sets.json'))['sets'] if s['name']=='$name').get('dir',''))")
  src=${src:+$repo/$src}
  mkdir -p "$work/$name"
  gen=$(/usr/bin/python3 -c "import json;print(next(s for s in json.load(open('sets.json'))['sets'] if s['name']=='$name').get('generate',''))")
  model=$(/usr/bin/python3 -c "import json;print(next(s for s in json.load(open('sets.json'))['sets'] if s['name']=='$name').get('model',''))")
  if [ -n "$model" ]; then
    (cd "$repo" && bazel run //tools:ontrain -- generate --model "$repo/$model" --out "$work/$name") >/dev/null 2>&1
    continue
  fi
  optim=$(/usr/bin/python3 -c "import json;print(next(s for s in json.load(open('sets.json'))['sets'] if s['name']=='$name').get('optimizer_model',''))")
  if [ -n "$gen" ]; then
    (cd "$repo" && bazel run //tools:ontrain -- generate --builtin "$gen" --out "$work/$name") >/dev/null 2>&1
    [ -z "$optim" ] || cp "$repo/$optim" "$work/$name/optimizer_model.onnx"
    continue
  fi
  /usr/bin/python3 patch_dropout.py "${src:-$artifacts/$name}" "$work/$name" "$zero"
  # ONNX Runtime 1.19.2 accepts only version-2 checkpoints: re-encode a version-1 file with flatc (same
  # tables), independently of ontrain's own reader and writer.
  flatc --json --raw-binary --strict-json -o "$work/$name" "$repo/checkpoint/ort_checkpoint.fbs" -- "$work/$name/checkpoint"
  if grep -q '"version": 1,' "$work/$name/checkpoint.json"; then
    sed -i 's/"version": 1,/"version": 2,/' "$work/$name/checkpoint.json"
    flatc -b -o "$work/$name" "$repo/checkpoint/ort_checkpoint.fbs" "$work/$name/checkpoint.json"
    mv "$work/$name/checkpoint.bin" "$work/$name/checkpoint"
  fi
done
{
  echo "# ONNX Runtime 1.19.2 (onnxruntime-web, wasm) training losses: <set> <step> <loss>."
  echo "# Made by tools/ort_reference/make_reference.sh from ../shared/ort-artifacts; inputs in sets.json."
  node train_losses.js "$work"
} > "$repo/tests/data/ort_reference_losses.txt"
echo "wrote $repo/tests/data/ort_reference_losses.txt"
