"""tools/examples/train_fashion_mnist.py end to end: ontrain generate makes the MLP's artifacts, the
ONNX-Runtime-style loop trains one epoch of Debian's Fashion-MNIST through ontrain.api, and the test
accuracy must reach the CLI demo's (85.9% measured there; 84% asserted). Run by pytest.
"""
import os
import re
import subprocess
import sys

import ontrain_test_support

ontrain_test_support.reexec_with_asan_runtime()

import pytest

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", ""))
TMP = os.environ.get("TEST_TMPDIR", "/tmp")


def test_one_epoch_reaches_the_demos_accuracy():
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        pytest.skip("Debian's dataset-fashion-mnist is not installed (tools/setup.sh installs it)")
    package = os.path.join(ROOT, "bindings/python")
    env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools/examples/train_fashion_mnist.py"), "--artifacts",
         os.path.join(TMP, "fmnist"), "--ontrain", os.path.join(ROOT, "tools/ontrain")],
        env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r"test accuracy ([0-9.]+)%", out.stdout)
    assert m, out.stdout
    print(out.stdout)
    assert float(m.group(1)) >= 84.0, out.stdout
    assert os.path.getsize(os.path.join(TMP, "fmnist", "inference.onnx")) > 0


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
