#!/usr/bin/env python3
"""The GPU benchmark workloads, defined once for both engines.

  bench_models.py export DIR       (here, Debian's /usr/bin/python3 with PyTorch 1.13): writes
                                   DIR/<name>/forward.onnx and DIR/models.json; tools/gpu/pack.sh then makes
                                   training artifacts from each with `ontrain generate`.
  bench_models.py torch DIR [N]    (on the GPU machine, its PyTorch): times N full training steps of the same
                                   modules on CUDA (zero_grad, forward, cross-entropy, backward, AdamW step,
                                   loss.item(): the host sees every loss, as `ontrain bench` does) and prints
                                   one JSON line per model.

Workloads: the CPU benchmark's (tools/bench_modules.py: mlp_small, mlp_large, cnn, transformer, resnet,
mobilenet, gpt) at larger batches (GPU_BATCH), exported in training mode as the CPU benchmark does.
"""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_workloads as workloads  # noqa: E402  (beside this file in the bundle, in tools/ in the tree)


# The reference workloads of the CPU benchmark (tools/bench_workloads.py), at batches that give a GPU work.
GPU_BATCH = {"mlp_small": 256, "mlp_large": 512, "cnn": 256, "transformer": 64, "resnet": 128, "mobilenet": 128,
             "gpt": 64}
MODELS = [(name, cls, (GPU_BATCH[name],) + tuple(shape[1:]), 14) for name, cls, shape in workloads.WORKLOADS]


def export(out):
    os.makedirs(out, exist_ok=True)
    meta = {}
    for name, cls, shape, opset in MODELS:
        torch.manual_seed(0)
        model = cls().train()
        os.makedirs(os.path.join(out, name), exist_ok=True)
        torch.onnx.export(model, workloads.example_input(name, shape), os.path.join(out, name, "forward.onnx"),
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=opset,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
        meta[name] = {"batch": shape[0], "shape": list(shape)}
    with open(os.path.join(out, "models.json"), "w") as f:
        json.dump(meta, f, indent=1)


def bench(out, steps):
    if not torch.cuda.is_available():
        print(json.dumps({"error": "PyTorch sees no CUDA device"}))
        return
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # ontrain computes float32 without TF32
    torch.backends.cudnn.allow_tf32 = False
    # PyTorch at its best at fixed shapes: cuDNN times its algorithms on the first step and keeps the fastest
    # (deterministic or not; ontrain keeps to deterministic ones, its default).
    torch.backends.cudnn.benchmark = True
    for name, cls, shape, _ in MODELS:
        # the same loop and optimizer as the CPU benchmark (as pack.sh generates the artifacts: lr 1e-3,
        # betas 0.9/0.999, eps 1e-8, weight decay 0.01, PyTorch's AdamW)
        times = workloads.step_times_pytorch(name, cls, shape, steps, device=dev)
        med = statistics.median(times)
        print(json.dumps({"model": name, "engine": "pytorch-" + torch.__version__, "device": torch.cuda.get_device_name(),
                          "batch": shape[0], "median_ms": med, "p10_ms": times[len(times) // 10],
                          "p90_ms": times[(9 * len(times)) // 10], "steps_per_s": 1e3 / med}))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "torch":
        bench(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 200)
    else:
        sys.exit(__doc__)
