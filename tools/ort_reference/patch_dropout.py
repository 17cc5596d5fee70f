#!/usr/bin/python3
"""Copies an artifact set's models into OUT, with the named Dropout ratio initializers set to 0.

Run with Debian's /usr/bin/python3 (python3-onnx). Dropout draws random masks that two engines cannot
share; with ratio 0 it is the identity in both, and everything else in the model stays as ONNX Runtime
generated it.
"""
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main(src, out, names):
    for f in ["training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint"]:
        shutil.copy(f"{src}/{f}", f"{out}/{f}")
    if not names:
        return
    for f in ["training_model.onnx", "eval_model.onnx"]:
        m = onnx.load(f"{out}/{f}")
        for init in m.graph.initializer:
            if init.name in names:
                init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), init.name))
        onnx.save(m, f"{out}/{f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [n for n in sys.argv[3].split(",") if n])
