#!/usr/bin/env python3
"""The GPU benchmark workloads, defined once for both engines.

  bench_models.py export DIR       (here, Debian's /usr/bin/python3 with PyTorch 1.13): writes
                                   DIR/<name>/forward.onnx and DIR/models.json; tools/gpu/pack.sh then makes
                                   training artifacts from each with `ontrain generate`.
  bench_models.py torch DIR [N]    (on the GPU machine, its PyTorch): times N full training steps of the same
                                   modules on CUDA (zero_grad, forward, cross-entropy, backward, AdamW step,
                                   loss.item(): the host sees every loss, as `ontrain bench` does) and prints
                                   one JSON line per model.
  bench_models.py cpu NAME THREADS [N]
                                   (on the GPU machine, its PyTorch, which uses MKL and oneDNN): the same on
                                   that machine's CPU at the CPU benchmark's batch (models.json "cpu_batch"),
                                   at THREADS intra-op threads; one JSON line. run.sh runs it in a process of
                                   its own per thread count, pinned to two cores beside `ontrain bench`, so
                                   the issue's CPU ratios are also measured on that machine's (Intel) CPU.

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
        cpu_batch = next(w[2][0] for w in workloads.WORKLOADS if w[0] == name)
        meta[name] = {"batch": shape[0], "shape": list(shape), "cpu_batch": cpu_batch}
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


def bench_cpu(name, threads, steps):
    # The thread pools are sized by the environment run.sh gives this process (OMP_NUM_THREADS,
    # MKL_NUM_THREADS) and by set_num_threads; the CPUs by its affinity (taskset).
    torch.set_num_threads(threads)
    cls, shape = next((w[1], w[2]) for w in workloads.WORKLOADS if w[0] == name)
    times = workloads.step_times_pytorch(name, cls, shape, steps)
    med = statistics.median(times)
    print(json.dumps({"model": name, "engine": "pytorch-" + torch.__version__, "device": "cpu", "threads": threads,
                      "batch": shape[0], "median_ms": med, "steps_per_s": 1e3 / med,
                      "blas": "mkl" if torch.backends.mkl.is_available() else "other",
                      "cpus": len(os.sched_getaffinity(0))}))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "cpu":
        bench_cpu(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 100)
    elif len(sys.argv) >= 3 and sys.argv[1] == "torch":
        bench(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 200)
    else:
        sys.exit(__doc__)
