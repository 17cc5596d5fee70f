#!/usr/bin/env python3
"""ONNX Runtime's Python training loop on Fashion-MNIST, run by ontrain.

The loop is the one ONNX Runtime's on-device training documentation shows (CheckpointState, Module,
Optimizer, LinearLRScheduler; train, lazy_reset_grad, eval, save, export); only the import names ontrain.
The artifacts are a 784-256-10 MLP made by `ontrain generate --builtin mlp` (the CLI demo's model), and
the data is Debian's dataset-fashion-mnist.

Usage (from the repository root, after `bazel build -c opt //tools:ontrain //bindings/python:site`, or
with the wheel installed, see the README):
  PYTHONPATH=.bazel/bin/bindings/python/site /usr/bin/python3 tools/examples/train_fashion_mnist.py [--epochs 1]
"""
import argparse
import gzip
import os
import subprocess
import sys
import time

import numpy as np

from ontrain.api import CheckpointState, LinearLRScheduler, Module, Optimizer

DATA = "/usr/share/datasets/fashion-mnist"


def load(kind):
    """IDX images (scaled to [0, 1], as the CLI reads them) and labels."""
    with gzip.open(os.path.join(DATA, f"{kind}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(os.path.join(DATA, f"{kind}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64)
    return images, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--artifacts", default="/tmp/ontrain-python-example")
    p.add_argument("--ontrain", default=os.environ.get("ONTRAIN_BIN", ".bazel/bin/tools/ontrain"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    a = args.artifacts
    if not os.path.exists(os.path.join(a, "training_model.onnx")):
        subprocess.run([args.ontrain, "generate", "--builtin", "mlp", "--out", a, "--extra-outputs", "logits"],
                       check=True)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")

    state = CheckpointState.load_checkpoint(os.path.join(a, "checkpoint"))
    model = Module(os.path.join(a, "training_model.onnx"), state, os.path.join(a, "eval_model.onnx"))
    optimizer = Optimizer(os.path.join(a, "optimizer_model.onnx"), model)
    steps_per_epoch = (len(train_x) + args.batch_size - 1) // args.batch_size
    scheduler = LinearLRScheduler(optimizer, warmup_step_count=50,
                                  total_step_count=steps_per_epoch * args.epochs, initial_lr=args.lr)
    rng = np.random.default_rng(args.seed)

    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(train_x))
        start, total = time.time(), 0.0
        for b in range(steps_per_epoch):
            idx = order[b * args.batch_size:(b + 1) * args.batch_size]
            loss, _ = model(train_x[idx], train_y[idx])
            optimizer.step()
            scheduler.step()
            model.lazy_reset_grad()
            total += float(loss)
        seconds = time.time() - start

        model.eval()
        logits_at = model.output_names().index("logits")
        correct = 0
        for b in range(0, len(test_x), 1000):
            out = model(test_x[b:b + 1000], test_y[b:b + 1000])
            correct += int((np.argmax(out[logits_at], axis=1) == test_y[b:b + 1000]).sum())
        print(f"epoch {epoch + 1}: mean training loss {total / steps_per_epoch:.4f}, "
              f"{steps_per_epoch / seconds:.0f} steps/s, test accuracy {100.0 * correct / len(test_x):.2f}%")

    CheckpointState.save_checkpoint(state, os.path.join(a, "checkpoint.trained"))
    model.export_model_for_inferencing(os.path.join(a, "inference.onnx"), ["logits"])
    print(f"trained checkpoint and inference.onnx are in {a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
