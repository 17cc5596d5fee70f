"""The wheel: tools/build_wheel.py packs the built extension and the package, pip installs it into a fresh
virtual environment with no index (no network), and the installed package trains tests/data/ort_mlp from
another folder to the numpy reference's first losses. Run by pytest.
"""
import os
import subprocess
import sys

import ontrain_test_support

ontrain_test_support.reexec_with_asan_runtime()

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", ""))
TMP = os.environ.get("TEST_TMPDIR", "/tmp")

SCRIPT = """
import sys
import numpy as np
import ontrain
from ontrain.api import CheckpointState, Module, Optimizer
from ontrain.artifacts import LossType, generate_artifacts
assert "site-packages" in ontrain.__file__, ontrain.__file__
d = sys.argv[1]
state = CheckpointState.load_checkpoint(d + "/checkpoint")
model = Module(d + "/training_model.onnx", state, d + "/eval_model.onnx")
optimizer = Optimizer(d + "/optimizer_model.onnx", model)
for step in range(2):
    x = (np.sin(0.37 * np.arange(48) + 1.3 * step) * 0.8).astype(np.float32).reshape(8, 6)
    y = np.array([(7 * i + 3 * step) % 3 for i in range(8)])
    loss, _ = model(x, y)
    optimizer.step()
    model.lazy_reset_grad()
    print(repr(float(loss)))
"""


def test_wheel_installs_offline_and_trains():
    out = os.path.join(TMP, "dist")
    built = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools/build_wheel.py"), "--extension",
         os.path.join(ROOT, "bindings/python/ontrain/_ontrain.so"), "--package",
         os.path.join(ROOT, "bindings/python/ontrain"), "--out", out],
        capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wheel = built.stdout.strip().splitlines()[-1]
    assert wheel.endswith(".whl") and os.path.isfile(wheel)
    venv = os.path.join(TMP, "venv")
    # --system-site-packages: numpy from Debian's python3-numpy, as a user's offline machine would have it
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    pip = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([py, "-c", SCRIPT, os.path.join(ROOT, "tests/data/ort_mlp")], cwd=TMP, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    losses = [float(v) for v in run.stdout.split()]
    # tests/data/ort_mlp/reference.txt (numpy float64): 1.1630782336, 1.2660928880
    assert abs(losses[0] - 1.1630782336138501) <= 1e-5 and abs(losses[1] - 1.2660928880455145) <= 1e-5, losses


if __name__ == "__main__":
    import pytest
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
