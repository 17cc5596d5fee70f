#!/usr/bin/python3
"""Writes tests/data/npz/{stored,compressed}.npz with numpy (np.savez and np.savez_compressed, which use
zip64 local headers and deflate respectively) so that ontrain's .npz reader is tested against numpy's own
files. Run with Debian's /usr/bin/python3 from the repository root."""
import numpy as np

arrays = {
    "input": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "labels": np.array([2, 0, 1], dtype=np.int64),
    "mask": np.array([True, False, True]),
    "scalar": np.float64(2.5),
}
np.savez("tests/data/npz/stored.npz", **arrays)
np.savez_compressed("tests/data/npz/compressed.npz", **arrays)
