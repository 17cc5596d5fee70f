#!/usr/bin/python3
"""The reference workloads of the provider benchmark, timed in ontrain and, on request, in PyTorch and ONNX
Runtime in the same run.

  /usr/bin/python3 tools/bench_workloads.py [--threads 1,2] [--steps 200] [--rounds 3] [--max-rounds 5] [--json FILE]
      [--only NAME,...] [--compare-pytorch] [--compare-ort] [--providers cpu,cuda] [--flush-denormals] [--keep DIR]

For each workload: the forward model is built in PyTorch (seeded) and exported to ONNX at opset 14,
`ontrain generate` makes training artifacts from it (cross-entropy, PyTorch's AdamW: lr 1e-3, eps 1e-8,
weight decay 0.01), and `ontrain bench` times full training steps on synthetic inputs on each provider
(a provider that cannot start here, such as cuda without a GPU, is reported and skipped).

--compare-pytorch: PyTorch times the same module, batch, initial weights and optimizer (zero_grad, forward,
cross-entropy, backward, step, loss.item()) with the same thread count, in a child process whose OpenBLAS
and OpenMP pools have that many threads; it also reports PyTorch's peak RSS. Needs libopenblas0-pthread
(without it Debian's PyTorch runs on the reference BLAS, 3x slower: the script refuses to compare then).

--compare-ort: ONNX Runtime's native CPU inference (onnxruntime-node) runs the forward model with the same
thread count, giving ontrain's step time over ORT's forward time; and ONNX Runtime's own training engine
(onnxruntime-web 1.19.2, wasm, one thread) trains the same artifacts (tools/ort_reference/bench_ort.js,
npm-installed there when missing).

--rounds N (default 3): with a comparison, each CPU row is measured N times in turn, ontrain, PyTorch and
ONNX Runtime's forward pass (its wasm training engine in the first round only), and each engine's median
round is reported (the rounds in "steps_per_s_rounds", "pytorch_steps_per_s_rounds" and
"ort_forward_ms_rounds"): this machine's second core is shared, and a busy moment during one engine's
measurement had moved single-round ratios by up to 25% (docs/benchmarks.md, run G).

--max-rounds N (default 5): while some engine's rounds of a row differ by more than NOISY_SPREAD (its fastest
over its slowest), more rounds of all three are measured, up to N in all, and the medians are taken over
them all ("rounds" in the record says how many): in run L (docs/benchmarks.md) two of the MobileNet's three
two-thread rounds ran while the second core was busy (92.6, 59.3 and 60.1 steps/s), and the median put its
step at 3.64x ONNX Runtime's forward pass where a quiet run measured 2.23x. With rounds, the records also
hold "ratio_paired" and "step_over_ort_forward_paired": the median over rounds of each round's own ratio
(ontrain and the reference measured one after the other), which a busy stretch that slows both cancels
in; the table and the verdicts use the medians, and a verdict that fails on them but holds paired says so.

--flush-denormals: both engines flush subnormal floats to zero (`ontrain bench --flush-denormals`,
`torch.set_flush_denormal(True)` in PyTorch's processes); results then differ from IEEE arithmetic where
values are subnormal. Off by default, so that the tables compare the engines' exact arithmetic; on CPUs
that take a microcode assist for subnormals (Intel's) it shows what that costs each engine.

Prints a table with the CPU model and its vector ISA; --json writes one record per workload, provider and
thread count: {"workload", "provider", "threads", "steps_per_s", "peak_rss_mb", "allocs_per_step"}, plus
"pytorch_steps_per_s" and "pytorch_peak_rss_mb", and "ort_forward_ms", "step_over_ort_forward" and
"ort_web_steps_per_s", when compared; "pool_choice", the pool tuning's decision as `ontrain bench` printed
it (a two-thread row no faster than one thread says so, with it).

The floor (CPU rows): a short profiled `ontrain bench` counts the step's matrix FLOPs (MatMul, Gemm, the
convolutions and their gradients, from the shapes run) and measures one core's FMA peak; "floor ms" is
the time those FLOPs take at that peak on the row's cores, the least any engine can need; "/floor" is
ontrain's step over it, and "cap" PyTorch's step over it: the ratio to PyTorch that a step of exactly the
floor would reach, so a ratio target above the cap cannot be met on this CPU. The records carry
"matrix_gflop_per_step", "peak_gflops_per_core", "floor_ms", "step_over_floor" and "ratio_at_floor".

Workloads: tools/bench_modules.py (the issue's four, then three architectures as people build them).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_modules import ISSUE_WORKLOADS, TOKENS, WORKLOADS, example_input  # noqa: E402  (beside this file)
from bench_verdicts import noisy_rounds, paired_median, verdicts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_core(vendor, family, model):
    """The core generation of the x86 CPUs this machine kind has shown (the VM hides the model name), where
    known: it decides the vector throughput (Zen 4 runs 512-bit FMAs at half the rate of Zen 5)."""
    if vendor == "AuthenticAMD" and family == 25:
        return "Zen 4" if 0x10 <= model <= 0x1f or 0x60 <= model <= 0x7f or 0xa0 <= model <= 0xaf else "Zen 3"
    if vendor == "AuthenticAMD" and family == 26:
        return "Zen 5"
    if vendor == "GenuineIntel" and family == 6:
        return {143: "Sapphire Rapids", 207: "Emerald Rapids", 173: "Granite Rapids", 106: "Ice Lake"}.get(model)
    return None


def cpu_description():
    model, flags, fields = "unknown CPU", set(), {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model == "unknown CPU":
                model = value.strip()
            if key == "flags":
                flags = set(value.split())
            if key in ("vendor_id", "cpu family", "model") and key not in fields:
                fields[key] = value.strip()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    try:
        family, number = int(fields.get("cpu family", "")), int(fields.get("model", ""))
        core = cpu_core(fields.get("vendor_id"), family, number)
        model += " (%sfamily %d model %d)" % (core + ", " if core else "", family, number)
    except ValueError:
        pass
    return "%s, %d cores, %s" % (model, os.cpu_count(), isa)


def step_times_pytorch(name, cls, shape, steps, device="cpu"):
    """Milliseconds of each of `steps` full training steps (after 20 of warm-up), sorted."""
    torch.manual_seed(0)
    model = cls().to(device).train()
    args = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    opt = None
    if str(device) != "cpu":
        # On a GPU, PyTorch at its best: the fused AdamW (one kernel for all parameters, PyTorch >= 2.0),
        # as ontrain's one multi-tensor launch.
        try:
            opt = torch.optim.AdamW(model.parameters(), fused=True, **args)
        except (TypeError, RuntimeError):
            opt = None
    if opt is None:
        opt = torch.optim.AdamW(model.parameters(), **args)
    x = example_input(name, shape).to(device)
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


def peak_rss_mb():
    """This process's peak resident set (VmHWM; getrusage's ru_maxrss would include the parent's, as Linux
    carries it across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    return 0.0


def time_pytorch(name, cls, shape, threads, steps):
    """Steps/s and peak RSS (MB) of this process (flushing subnormals when ONTRAIN_BENCH_FLUSH is 1)."""
    torch.set_num_threads(threads)
    if os.environ.get("ONTRAIN_BENCH_FLUSH") == "1" and not torch.set_flush_denormal(True):
        sys.exit("torch.set_flush_denormal(True) is not supported on this CPU")
    per_s = 1e3 / statistics.median(step_times_pytorch(name, cls, shape, steps))
    return per_s, peak_rss_mb()


OPENBLAS_PROBE = """
import ctypes, torch
path = next(l.split()[-1] for l in open("/proc/self/maps") if "libopenblas" in l)
lib = ctypes.CDLL(path)
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
"""

# OpenBLAS kernel sets that use this machine kind's vector units (AVX2 and up).
OPENBLAS_VECTOR_CORES = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}


def openblas_for_pytorch():
    """The OPENBLAS_CORETYPE PyTorch's child processes get, or None, and a line saying which kernels
    PyTorch's OpenBLAS runs. Debian's OpenBLAS 0.3.21 picks its kernels at run time from the CPU's family
    and treats a family it does not know (AMD's Zen 5, family 26) as Barcelona: SSE2 kernels, about 3x
    slower GEMMs, a PyTorch that would flatter ontrain. Where it picks a kernel set without AVX2 on a CPU
    that has AVX2, the children are given the best set the CPU supports, and the probe is repeated to see
    that it took."""
    def probe(env):
        r = subprocess.run([sys.executable, "-c", OPENBLAS_PROBE], env=env, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    detected = probe(dict(os.environ))
    if detected is None:
        return None, "OpenBLAS kernels: unknown (the probe failed)"
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    best = ("Cooperlake" if "avx512_bf16" in flags else "SkylakeX" if "avx512f" in flags else
            "Haswell" if "avx2" in flags and "fma" in flags else None)
    if os.environ.get("OPENBLAS_CORETYPE") or detected.lower() in OPENBLAS_VECTOR_CORES or best is None:
        return None, "OpenBLAS kernels: %s (%s)" % (
            detected, "OPENBLAS_CORETYPE from the environment" if os.environ.get("OPENBLAS_CORETYPE") else "detected")
    forced = probe(dict(os.environ, OPENBLAS_CORETYPE=best))
    if forced is None or forced.lower() != best.lower():
        sys.exit("PyTorch's OpenBLAS runs %s kernels on a CPU with %s and OPENBLAS_CORETYPE=%s did not take (%s): "
                 "comparing against it would flatter ontrain" % (detected, best, best, forced))
    return best, "OpenBLAS kernels: %s (OPENBLAS_CORETYPE: OpenBLAS detected %s, without AVX2)" % (forced, detected)


FLUSH_DENORMALS = False  # --flush-denormals


def time_pytorch_isolated(name, threads, steps, coretype=None):
    """time_pytorch in a child process whose OpenBLAS and OpenMP pools have `threads` threads: PyTorch's
    set_num_threads does not reach OpenBLAS, which otherwise uses every core even at "1 thread"; and with
    OPENBLAS_CORETYPE=coretype where openblas_for_pytorch chose one."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               ONTRAIN_BENCH_FLUSH="1" if FLUSH_DENORMALS else "0")
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--pytorch-worker", name, str(threads), str(steps)],
                         env=env, check=True, capture_output=True, text=True).stdout
    per_s, rss = out.strip().splitlines()[-1].split()
    return float(per_s), float(rss)


def time_ontrain(ontrain, artifacts, provider, batch, threads, steps):
    """ontrain bench's JSON record, or the error line when the provider cannot run here."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        r = subprocess.run([ontrain, "bench", "--artifacts", artifacts, "--provider", provider, "--threads",
                            str(threads), "--batch-size", str(batch), "--steps", str(steps), "--json", f.name] +
                           (["--flush-denormals"] if FLUSH_DENORMALS else []),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        rec = json.load(open(f.name))
        # The pool tuning's decision ("pool (pooled 0.25 ms, serial 0.31 ms)", "serial (...)", "not tuned"):
        # a two-thread row at one-thread speed says whether the pool ran slowly or was left out.
        for line in r.stdout.splitlines():
            if line.strip().startswith("intra-op pool per step:"):
                rec["pool_choice"] = line.split(":", 1)[1].strip()
        return rec, None


def matrix_floor(ontrain, artifacts, batch):
    """The workload's matrix FLOPs per step and one core's FMA peak, from a short profiled `ontrain bench`
    at one thread (the FLOPs depend only on the shapes), or None where it cannot run."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        r = subprocess.run([ontrain, "bench", "--artifacts", artifacts, "--threads", "1", "--batch-size", str(batch),
                            "--steps", "5", "--warmup", "3", "--profile", "--json", f.name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rec = json.load(open(f.name)) if r.returncode == 0 else {}
    if "matrix_gflop_per_step" not in rec:
        return None
    return rec["matrix_gflop_per_step"], rec["peak_gflops_per_core"]


def ort_dir():
    """tools/ort_reference in the source tree (also under `bazel run`), with its npm packages installed."""
    src = os.environ.get("BUILD_WORKSPACE_DIRECTORY", ROOT)
    d = os.path.join(src, "tools", "ort_reference")
    if not os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-node")) or \
            not os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-web")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=d, check=True,
                       stdout=subprocess.DEVNULL)
    return d


def time_ort(name, forward, artifacts, shape, threads, steps, forward_only=False):
    out = subprocess.run(["node", os.path.join(ort_dir(), "bench_ort.js"), forward, artifacts, str(threads),
                          str(steps), ",".join(str(d) for d in shape), "int64" if name in TOKENS else "float"] +
                         (["forward-only"] if forward_only else []),
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=200)
    # Each CPU row is measured in this many rounds, ontrain, PyTorch and ONNX Runtime's forward pass in turn
    # (ONNX Runtime's wasm training in the first only), and each engine's median round is reported: on a
    # shared machine a busy moment then costs one round of one engine, not the row's ratio.
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--only")
    ap.add_argument("--providers", default="cpu,cuda")
    ap.add_argument("--compare-pytorch", action="store_true")
    ap.add_argument("--compare-ort", action="store_true")
    ap.add_argument("--flush-denormals", action="store_true")
    ap.add_argument("--ontrain", default=os.path.join(ROOT, ".bazel/bin/tools/ontrain"))
    ap.add_argument("--keep", metavar="DIR", help="make and keep each workload's model and artifacts in DIR/<name>")
    ap.add_argument("--pytorch-worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global FLUSH_DENORMALS
    FLUSH_DENORMALS = args.flush_denormals
    if args.pytorch_worker:
        name, threads, steps = args.pytorch_worker
        cls, shape = next((c, s) for n, c, s in WORKLOADS if n == name)
        print("%f %f" % time_pytorch(name, cls, shape, int(threads), int(steps)))
        return
    if args.compare_pytorch:
        blas = torch.__config__.show()
        if "OpenBLAS" not in blas and "MKL" not in blas:
            sys.exit("PyTorch is not using an optimized BLAS; install libopenblas0-pthread")
    coretype, blas_line = openblas_for_pytorch() if args.compare_pytorch else (None, "")
    # Each workload's forward model and artifacts: under --keep DIR, kept for `ontrain bench --profile` and
    # the like; otherwise in a temporary folder removed at the end (16 MB a run), whatever happened.
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    work = args.keep or tempfile.mkdtemp(prefix="ontrain-bench-")
    try:
        records, skipped = measure(args, work, coretype, blas_line)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for what, why in skipped.items():
        print("not measured: %s: %s" % (what, why))
    for line in verdicts(records, ISSUE_WORKLOADS):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


def measure(args, work, coretype, blas_line):
    """Times every chosen workload (forward models and artifacts made under `work`); returns the records and
    what was not measured, with why."""
    records, skipped = [], {}
    print("CPU: %s; PyTorch %s%s%s" % (cpu_description(), torch.__version__, "; " + blas_line if blas_line else "",
                                      "; subnormals flushed to zero in both engines" if FLUSH_DENORMALS else ""))
    head = "%-12s %-6s %3s %10s %8s %9s" % ("workload", "prov", "thr", "st/s", "RSS MB", "allocs/st")
    if args.compare_pytorch:
        head += " %10s %8s %6s" % ("torch st/s", "torch MB", "ratio")
    head += " %8s %6s" % ("floor ms", "/floor")
    if args.compare_pytorch:
        head += " %6s" % "cap"
    if args.compare_ort:
        head += " %9s %10s %9s" % ("ORT fw ms", "step/fw", "ORT-web")
    print(head)
    for name, cls, shape in WORKLOADS:
        if args.only and name not in args.only.split(","):
            continue
        torch.manual_seed(0)
        model = cls().train()
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        forward = os.path.join(d, "forward.onnx")
        # Training mode: BatchNormalization stays (normalizing with batch statistics, as PyTorch trains it)
        # instead of being folded into the convolutions as an eval-mode export does.
        torch.onnx.export(model, example_input(name, shape), forward, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=14, do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
        artifacts = os.path.join(d, "artifacts")
        subprocess.run([args.ontrain, "generate", "--model", forward, "--out", artifacts, "--eps", "1e-8",
                        "--weight-decay", "0.01", "--adam-mode", "0"], check=True, stdout=subprocess.DEVNULL)
        floor = matrix_floor(args.ontrain, artifacts, shape[0])
        for provider in args.providers.split(","):
            if provider in skipped:
                continue
            for threads in [int(t) for t in args.threads.split(",")]:
                ours, error = time_ontrain(args.ontrain, artifacts, provider, shape[0], threads, args.steps)
                if error:
                    skipped[provider] = error
                    break
                cpu_row = provider == "cpu"
                rounds = max(1, args.rounds) if cpu_row and (args.compare_pytorch or args.compare_ort) else 1
                most = max(rounds, args.max_rounds) if rounds > 1 else 1
                ours_rounds, torch_rounds, ort_rounds, o = [ours], [], [], None
                k = 0
                while k < rounds or (k < most and noisy_rounds(ours_rounds, torch_rounds, ort_rounds)):
                    if k > 0:
                        again, error = time_ontrain(args.ontrain, artifacts, provider, shape[0], threads, args.steps)
                        if error:
                            sys.exit("ontrain bench failed in round %d of %s: %s" % (k + 1, name, error))
                        ours_rounds.append(again)
                    if args.compare_pytorch and cpu_row:
                        torch_rounds.append(time_pytorch_isolated(name, threads, args.steps, coretype))
                    if args.compare_ort and cpu_row:
                        measured = time_ort(name, forward, artifacts, shape, threads, args.steps, forward_only=k > 0)
                        o = o or measured
                        ort_rounds.append(measured["forward_ms"])
                    k += 1
                rounds = k
                sps = [r["steps_per_s"] for r in ours_rounds]
                # median_high: a measured round (the pool's choice is that round's), also for an even count.
                mid = next(r for r in ours_rounds if r["steps_per_s"] == statistics.median_high(sps))
                rec = {"workload": name, "provider": provider, "threads": threads, "steps_per_s": mid["steps_per_s"],
                       "peak_rss_mb": max(r["peak_rss_mb"] for r in ours_rounds),
                       "allocs_per_step": max(r["allocs_per_step"] for r in ours_rounds)}
                if rounds > 1:
                    rec["rounds"] = rounds
                    rec["steps_per_s_rounds"] = sps
                if "pool_choice" in mid:
                    rec["pool_choice"] = mid["pool_choice"]
                if FLUSH_DENORMALS:
                    rec["flush_denormals"] = True
                line = "%-12s %-6s %3d %10.1f %8.1f %9.1f" % (name, provider, threads, rec["steps_per_s"],
                                                           rec["peak_rss_mb"], rec["allocs_per_step"])
                if rounds > 1 and torch_rounds:
                    rec["ratio_paired"] = paired_median(sps, [t[0] for t in torch_rounds], lambda a, b: a / b)
                if rounds > 1 and ort_rounds:
                    rec["step_over_ort_forward_paired"] = paired_median(sps, ort_rounds, lambda a, b: 1e3 / a / b)
                if torch_rounds:
                    rec["pytorch_steps_per_s"] = statistics.median_high([t[0] for t in torch_rounds])
                    rec["pytorch_peak_rss_mb"] = max(t[1] for t in torch_rounds)
                    if rounds > 1:
                        rec["pytorch_steps_per_s_rounds"] = [t[0] for t in torch_rounds]
                    line += " %10.1f %8.1f %6.2f" % (rec["pytorch_steps_per_s"], rec["pytorch_peak_rss_mb"],
                                                     rec["steps_per_s"] / rec["pytorch_steps_per_s"])
                if floor and provider == "cpu":
                    # The least time any engine needs for the step's matrix products on this many cores, and
                    # the ratio to PyTorch that a step of exactly that time would give.
                    rec["matrix_gflop_per_step"], rec["peak_gflops_per_core"] = floor
                    rec["floor_ms"] = 1e3 * floor[0] / (floor[1] * threads)
                    rec["step_over_floor"] = 1e3 / rec["steps_per_s"] / rec["floor_ms"]
                    line += " %8.3f %6.2f" % (rec["floor_ms"], rec["step_over_floor"])
                    if "pytorch_steps_per_s" in rec:
                        rec["ratio_at_floor"] = 1e3 / rec["pytorch_steps_per_s"] / rec["floor_ms"]
                        line += " %6.2f" % rec["ratio_at_floor"]
                elif provider == "cpu":
                    line += " %8s %6s" % ("-", "-") + (" %6s" % "-" if args.compare_pytorch else "")
                if o is not None:
                    rec["ort_forward_ms"] = statistics.median_high(ort_rounds)
                    if rounds > 1:
                        rec["ort_forward_ms_rounds"] = ort_rounds
                    rec["step_over_ort_forward"] = 1e3 / rec["steps_per_s"] / rec["ort_forward_ms"]
                    if "train_steps_per_s" in o:
                        rec["ort_web_steps_per_s"] = o["train_steps_per_s"]
                    web = "%9.1f" % o["train_steps_per_s"] if "train_steps_per_s" in o else "%9s" % "failed"
                    line += " %9.3f %10.2f %s" % (rec["ort_forward_ms"], rec["step_over_ort_forward"], web)
                    if "train_error" in o:
                        skipped["onnxruntime-web on " + name] = o["train_error"]
                if rounds > args.rounds > 1:
                    line += "  (%d rounds: a busy machine)" % rounds
                print(line, flush=True)
                records.append(rec)
    return records, skipped


if __name__ == "__main__":
    main()
