#!/usr/bin/python3
"""The CPU reference workloads of the provider benchmark, timed in ontrain and in PyTorch in one run.

  /usr/bin/python3 tools/bench_workloads.py [--threads 1,2] [--steps 200] [--json FILE] [--only NAME,...]

For each workload: the forward model is built in PyTorch (seeded) and exported to ONNX, `ontrain generate`
makes training artifacts from it (cross-entropy, PyTorch's AdamW: lr 1e-3, eps 1e-8, weight decay 0.01),
`ontrain bench` times full training steps on synthetic inputs, and PyTorch times the same module, batch,
initial weights and optimizer (zero_grad, forward, cross-entropy, backward, step, loss.item()) with the
same thread count. Needs python3-torch, python3-onnx and libopenblas0-pthread (without it Debian's PyTorch
runs on the reference BLAS, 3x slower: the script refuses to compare then). Prints a table of steps/s and
ontrain / PyTorch ratios, with the CPU model and its vector ISA.

Workloads: mlp_small (784-128-10, batch 64), mlp_large (784-512-512-10, batch 128), cnn (Conv 1->32 3x3,
ReLU, MaxPool 2, Conv 32->64 3x3, ReLU, MaxPool 2, Flatten, Linear ->128, ReLU, Linear ->10 on 1x28x28,
batch 64), transformer (one pre-LayerNorm encoder block, seq 64, d_model 128, 4 heads, FFN 512, GELU,
mean-pool, Linear ->10, batch 16).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class MlpSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MlpLarge(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(64 * 5 * 5, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class Transformer(nn.Module):
    def __init__(self, d=128, heads=4, ff=512):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.head = nn.Linear(d, 10)
        self.heads, self.d = heads, d

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(2, 3) / (d // h) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        x = x + self.ff2(F.gelu(self.ff1(self.ln2(x))))
        return self.head(x.mean(dim=1))


# name, module, input shape
WORKLOADS = [("mlp_small", MlpSmall, (64, 784)), ("mlp_large", MlpLarge, (128, 784)), ("cnn", Cnn, (64, 1, 28, 28)),
             ("transformer", Transformer, (16, 64, 128))]


def cpu_description():
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return "%s, %d cores, %s" % (model, os.cpu_count(), isa)


def step_times_pytorch(cls, shape, steps, device="cpu"):
    """Milliseconds of each of `steps` full training steps (after 20 of warm-up), sorted."""
    torch.manual_seed(0)
    model = cls().to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    x = torch.rand(*shape, device=device) * 2 - 1
    y = torch.zeros(shape[0], dtype=torch.long, device=device)
    times = []
    for s in range(20 + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        if s >= 20:
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)


def time_pytorch(cls, shape, threads, steps):
    torch.set_num_threads(threads)
    return 1e3 / statistics.median(step_times_pytorch(cls, shape, steps))


def time_pytorch_isolated(name, threads, steps):
    """time_pytorch in a child process whose OpenBLAS and OpenMP pools have `threads` threads: PyTorch's
    set_num_threads does not reach OpenBLAS, which otherwise uses every core even at "1 thread"."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--pytorch-worker", name, str(threads), str(steps)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def time_ontrain(ontrain, artifacts, batch, threads, steps):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([ontrain, "bench", "--artifacts", artifacts, "--provider", "cpu", "--threads", str(threads),
                        "--batch-size", str(batch), "--steps", str(steps), "--json", f.name], check=True,
                       stdout=subprocess.DEVNULL)
        return json.load(open(f.name))["steps_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--json")
    ap.add_argument("--only")
    ap.add_argument("--ontrain", default=os.path.join(ROOT, ".bazel/bin/tools/ontrain"))
    ap.add_argument("--pytorch-worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pytorch_worker:
        name, threads, steps = args.pytorch_worker
        cls, shape = next((c, s) for n, c, s in WORKLOADS if n == name)
        print(time_pytorch(cls, shape, int(threads), int(steps)))
        return
    blas = torch.__config__.show()
    if "OpenBLAS" not in blas and "MKL" not in blas:
        sys.exit("PyTorch is not using an optimized BLAS; install libopenblas0-pthread")
    work = tempfile.mkdtemp(prefix="ontrain-bench-")
    records = []
    print("CPU: %s; PyTorch %s" % (cpu_description(), torch.__version__))
    print("%-12s %7s %14s %14s %7s" % ("workload", "threads", "ontrain st/s", "PyTorch st/s", "ratio"))
    for name, cls, shape in WORKLOADS:
        if args.only and name not in args.only.split(","):
            continue
        torch.manual_seed(0)
        model = cls().eval()
        d = os.path.join(work, name)
        os.makedirs(d)
        torch.onnx.export(model, torch.randn(*shape), os.path.join(d, "forward.onnx"), input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=14, do_constant_folding=False)
        subprocess.run([args.ontrain, "generate", "--model", os.path.join(d, "forward.onnx"), "--out",
                        os.path.join(d, "artifacts"), "--eps", "1e-8", "--weight-decay", "0.01", "--adam-mode", "0"],
                       check=True, stdout=subprocess.DEVNULL)
        for threads in [int(t) for t in args.threads.split(",")]:
            ours = time_ontrain(args.ontrain, os.path.join(d, "artifacts"), shape[0], threads, args.steps)
            theirs = time_pytorch_isolated(name, threads, args.steps)
            print("%-12s %7d %14.1f %14.1f %7.2f" % (name, threads, ours, theirs, ours / theirs))
            records.append({"workload": name, "provider": "cpu", "threads": threads, "steps_per_s": ours,
                            "pytorch_steps_per_s": theirs})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
