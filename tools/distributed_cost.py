#!/usr/bin/env python3
"""docs/distributed.md's cost table: what data-parallel training of the reference workloads would spend on
communication, against the step time this machine measures.

  tools/distributed_cost.py ONTRAIN WORKLOADS_DIR [--threads 1]

WORKLOADS_DIR holds one folder per workload with an `artifacts` folder inside (tools/bench.sh leaves them in
/tmp/ontrain-bench-*). For each: the trainable parameter count (`ontrain info`), the measured step and its
parts (`ontrain bench`), then per step the bytes all-reduced (float32 gradients), a ring all-reduce's time
at 10, 100 and 400 Gbit/s (2 (N-1)/N x bytes / bandwidth, plus 2 (N-1) x 5 us of latency), and the rank count
where the step time stops falling when one global batch is split N ways (N at most the batch): compute (the
TrainStep) shrinks as 1/N, the optimizer step does not, and the all-reduce is not hidden (the pessimistic
case; see the doc).
"""
import re
import subprocess
import sys

BATCH = {"mlp_small": 64, "mlp_large": 128, "cnn": 64, "transformer": 16, "resnet": 32, "mobilenet": 32, "gpt": 16}
LATENCY_S = 5e-6


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ring_seconds(nbytes, ranks, gbit):
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / (gbit * 1e9 / 8) + 2 * (ranks - 1) * LATENCY_S


def best_ranks(train_s, opt_s, nbytes, gbit, batch):
    """The N (at most the batch: one example per rank) with the smallest modelled step time, and the speedup."""
    times = {n: train_s / n + opt_s + ring_seconds(nbytes, n, gbit) for n in range(1, batch + 1)}
    n = min(times, key=times.get)
    return n, times[1] / times[n]


def main():
    ontrain, root = sys.argv[1], sys.argv[2]
    threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu}, {threads} thread(s) per rank\n")
    print("| workload | batch | trainable params | MB all-reduced per step | step ms (TrainStep + OptimizerStep) "
          "| all-reduce ms at 10 / 100 / 400 Gbit/s, N=2 | ranks until the step stops falling (speedup) at 10 / 100 / 400 Gbit/s |")
    print("|---|---|---|---|---|---|---|")
    for w, batch in BATCH.items():
        art = f"{root}/{w}/artifacts"
        info = run([ontrain, "info", "--artifacts", art])
        params = int(re.search(r"parameters: (\d+) trainable", info).group(1))
        out = run([ontrain, "bench", "--artifacts", art, "--threads", threads, "--batch-size", str(batch),
                   "--steps", "200"])
        step_ms = float(re.search(r"([\d.]+) ms/step median", out).group(1))
        parts = re.search(r"TrainStep ([\d.]+), OptimizerStep ([\d.]+)", out)
        train_s, opt_s = float(parts.group(1)) / 1e3, float(parts.group(2)) / 1e3
        nbytes = 4 * params
        comm = " / ".join(f"{1e3 * ring_seconds(nbytes, 2, g):.3f}" for g in (10, 100, 400))
        scale = " / ".join("%d (%.1fx)" % best_ranks(train_s, opt_s, nbytes, g, batch) for g in (10, 100, 400))
        print(f"| {w} | {batch} | {params} | {nbytes / 1e6:.2f} | {step_ms:.3f} ({1e3 * train_s:.3f} + {1e3 * opt_s:.3f}) "
              f"| {comm} | {scale} |")


if __name__ == "__main__":
    main()
