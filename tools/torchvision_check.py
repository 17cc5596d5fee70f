#!/usr/bin/python3
"""Generates training artifacts for torchvision's architectures and runs training steps on them: the models
people bring, as a new user would export them. For each model: PyTorch exports it in training mode (opset
17, batch axis symbolic, dropout and stochastic depth at 0: PyTorch 1.13 cannot export Bernoulli sampling),
`ontrain generate` makes the artifacts, its trainable parameter count must equal PyTorch's
`sum(p.numel() for p in model.parameters())`, and `ontrain bench` runs a few training steps on synthetic
inputs. Prints one line per model and exits non-zero when any fails.

  /usr/bin/python3 tools/torchvision_check.py [--ontrain PATH] [NAME ...]

Needs Debian's python3-torch and python3-torchvision (installed here when missing) and a built ontrain
(`bazel build -c opt //tools:ontrain`). Not part of tools/test.sh: it takes a few minutes; the parity of
gradients and losses with PyTorch is tested on small fixtures (tools/make_torch_fixtures.py).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "densenet121", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5",
          "squeezenet1_0", "mnasnet0_5", "regnet_x_400mf", "googlenet", "convnext_tiny", "vit_small", "swin_small"]


def build(name):
    """The module and its input size: torchvision's constructors with 10 classes, the transformers small."""
    import torchvision.models as tm
    if name == "vit_small":
        return tm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                    mlp_dim=64, num_classes=10), 32
    if name == "swin_small":
        return tm.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                                  window_size=[4, 4], num_classes=10, stochastic_depth_prob=0.0), 32
    kw = {"num_classes": 10}
    if name.startswith(("convnext", "efficientnet")):
        kw["stochastic_depth_prob"] = 0.0
    if name == "googlenet":
        kw.update(aux_logits=False, init_weights=True)
    return getattr(tm, name)(**kw), 64


def check(name, ontrain, work):
    import torch
    torch.manual_seed(0)
    model, size = build(name)
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    forward = os.path.join(work, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(2, 3, size, size), forward, opset_version=17, input_names=["x"],
                          output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
    want = sum(p.numel() for p in model.parameters())
    artifacts = os.path.join(work, name)
    gen = subprocess.run([ontrain, "generate", "--model", forward, "--out", artifacts, "--loss", "CrossEntropyLoss"],
                         capture_output=True, text=True)
    if gen.returncode != 0:
        return False, "generate failed: " + (gen.stderr.strip().splitlines() or ["?"])[-1]
    m = re.search(r"(\d+) trainable and (\d+) frozen", gen.stdout + gen.stderr)
    if not m:
        return False, "generate printed no parameter counts"
    got = int(m.group(1))
    if got != want:
        return False, "%d trainable parameters, PyTorch has %d" % (got, want)
    bench = subprocess.run([ontrain, "bench", "--artifacts", artifacts, "--batch-size", "4", "--steps", "5",
                            "--warmup", "2"], capture_output=True, text=True)
    if bench.returncode != 0:
        return False, "bench failed: " + (bench.stderr.strip().splitlines() or ["?"])[-1]
    ms = re.search(r"([\d.]+) ms/step", bench.stdout)
    return True, "%d parameters (as PyTorch), %s training nodes, %s ms per step at batch 4" % (
        got, re.search(r"(\d+) training nodes", gen.stdout + gen.stderr).group(1), ms.group(1) if ms else "?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ontrain", default=os.path.join(ROOT, ".bazel/bin/tools/ontrain"))
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision, onnx"], capture_output=True).returncode:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "python3-torch", "python3-torchvision", "python3-onnx"],
                       check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ontrain-torchvision-") as work:
        for name in args.names or MODELS:
            try:
                ok, what = check(name, args.ontrain, work)
            except Exception as e:  # an export PyTorch refuses, for instance
                ok, what = False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            failed += not ok
            print("%-20s %s  %s" % (name, "ok    " if ok else "FAILED", what), flush=True)
    print("%d of %d models failed" % (failed, len(args.names or MODELS)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
