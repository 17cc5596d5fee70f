#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz (tests/fuzz/corpus/<target>/) from the repository's real files,
files that numpy, onnx and Python's zipfile/gzip write, and artifacts that `ontrain generate` / `train` make.

Usage: /usr/bin/python3 tools/make_fuzz_corpus.py [--ontrain PATH]   (default: the opt-built binary)
       /usr/bin/python3 tools/make_fuzz_corpus.py --shared ../shared/ort-artifacts --out DIR
         (extra seeds for long campaigns from ONNX Runtime's artifact sets, which stay out of the repository:
         DIR/<target>/ for the model, checkpoint and session targets)
Multi-file seeds join their files with tests/fuzz/fuzz_util.h's section marker. Re-running rewrites every
seed; the checked-in corpus is what the README's test command fuzzes from.
"""
import argparse
import glob
import gzip
import io
import os
import shutil
import struct
import subprocess
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
MARK = b"\n=ONTRAIN-FUZZ-SECTION=\n"
CONFORMANCE = "/usr/include/onnx/backend/test/data/node"
# Small conformance models covering many ops, attributes and tensor kinds.
CONFORMANCE_CASES = [
    "test_conv_with_strides_padding", "test_gemm_all_attributes", "test_lstm_defaults", "test_gru_defaults",
    "test_resize_upsample_scales_linear", "test_einsum_batch_matmul", "test_slice", "test_scatter_elements_with_axis",
    "test_pad", "test_layer_normalization_4d_axis0", "test_softmax_axis_1", "test_batchnorm_epsilon",
    "test_reshape_reordered_all_dims", "test_gather_elements_1", "test_cast_FLOAT_to_FLOAT16", "test_if",
    "test_loop11", "test_sequence_insert_at_back", "test_constant", "test_maxpool_2d_pads", "test_range_float_type_positive_delta",
    "test_where_example", "test_split_variable_parts_1d", "test_topk", "test_cumsum_1d", "test_dropout_default",
]


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sections(*parts):
    return MARK.join(parts)


def npy(a, version=(1, 0)):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def models():
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/torch/*/forward.onnx"))):
        yield "torch_" + os.path.basename(os.path.dirname(p)), read(p)
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/ort_mlp/*.onnx"))):
        yield "ort_mlp_" + os.path.basename(p)[:-5], read(p)
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/optimizer_models/*.onnx"))):
        yield "optimizer_" + os.path.basename(p)[:-5], read(p)
    for case in CONFORMANCE_CASES:
        p = os.path.join(CONFORMANCE, case, "model.onnx")
        if os.path.exists(p):
            yield "onnx_" + case[5:], read(p)


def external_data_models():
    """(name, model bytes, weights.bin bytes) with tensors stored in weights.bin."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones(4, dtype=np.float32)
    blob = w.tobytes() + b.tobytes()

    def tensor(name, arr, offset, with_length=True):
        t = numpy_helper.from_array(arr, name)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        entries = [("location", "weights.bin"), ("offset", str(offset))]
        if with_length:
            entries.append(("length", str(arr.nbytes)))
        for k, v in entries:
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    for name, with_length in (("matmul_add_with_lengths", True), ("matmul_add_offsets_only", False)):
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y0"]), helper.make_node("Add", ["y0", "b"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
            [tensor("w", w, 0, with_length), tensor("b", b, w.nbytes, with_length)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        yield name, m.SerializeToString(), blob


def run(*args):
    subprocess.run(list(args), check=True, stdout=subprocess.DEVNULL)


def shared_seeds(shared, out):
    """Seeds from ONNX Runtime's artifact sets (each folder: models and a checkpoint)."""
    global OUT
    OUT = out
    count = 0
    for d in sorted(glob.glob(os.path.join(shared, "*"))):
        name = os.path.basename(d)
        files = {f: os.path.join(d, f) for f in os.listdir(d)} if os.path.isdir(d) else {}
        for f, p in files.items():
            if f.endswith(".onnx"):
                write("model_fuzzer", name + "_" + f, read(p))
                count += 1
            elif "checkpoint" in f and os.path.getsize(p) < (4 << 20):
                write("checkpoint_fuzzer", name + "_" + f, read(p))
                count += 1
        if {"training_model.onnx", "optimizer_model.onnx", "checkpoint"} <= set(files) and os.path.getsize(files["checkpoint"]) < (4 << 20):
            write("session_fuzzer", name, sections(read(files["training_model.onnx"]),
                                                   read(files["eval_model.onnx"]) if "eval_model.onnx" in files else b"",
                                                   read(files["optimizer_model.onnx"]), read(files["checkpoint"])))
            count += 1
    print("wrote", count, "seeds from", shared, "under", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ontrain", default=os.path.join(ROOT, "bazel-out/k8-opt/bin/tools/ontrain"))
    ap.add_argument("--shared")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.shared:
        shared_seeds(args.shared, args.out)
        return
    shutil.rmtree(OUT, ignore_errors=True)

    for name, data in models():
        write("model_fuzzer", name + ".onnx", data)
    for name, data in models():
        if name.startswith("torch_"):
            write("generate_fuzzer", name + ".onnx", data)
    for name, model, blob in external_data_models():
        write("external_data_fuzzer", name, sections(model, blob))

    # .npy / .npz: every dtype the reader knows, header versions 1 and 2, stored, deflated and zip64 archives.
    arrays = {
        "f4": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "f8": np.arange(3, dtype=np.float64),
        "f2": np.array([1.5, -2], dtype=np.float16), "i1": np.array([-3, 4], dtype=np.int8),
        "i2": np.array([7], dtype=np.int16), "i4": np.arange(4, dtype=np.int32).reshape(2, 2, 1),
        "i8": np.array([1, 2, 3], dtype=np.int64), "u1": np.array([255], dtype=np.uint8),
        "u2": np.array([9], dtype=np.uint16), "u4": np.array([10], dtype=np.uint32),
        "u8": np.array([11], dtype=np.uint64), "b1": np.array([True, False]), "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    for k, a in arrays.items():
        write("npz_fuzzer", k + ".npy", npy(np.asarray(a)))
    write("npz_fuzzer", "v2_header.npy", npy(arrays["f4"], version=(2, 0)))
    for p in sorted(glob.glob(os.path.join(ROOT, "tests/data/npz/*.npz"))):
        write("npz_fuzzer", os.path.basename(p), read(p))
    for compression, label in ((zipfile.ZIP_STORED, "stored"), (zipfile.ZIP_DEFLATED, "deflated")):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression) as z:
            for k in ("f4", "i8", "b1"):
                with z.open(k + ".npy", "w", force_zip64=True) as f:
                    f.write(npy(arrays[k]))
        write("npz_fuzzer", "zip64_" + label + ".npz", buf.getvalue())

    # IDX pairs: 3 images of 4x5 and their labels, plain and gzip-compressed.
    images = struct.pack(">IIII", 0x803, 3, 4, 5) + bytes(range(60))
    labels = struct.pack(">II", 0x801, 3) + bytes([0, 1, 2])
    write("idx_fuzzer", "plain", sections(images, labels))
    write("idx_fuzzer", "gzip", sections(gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)))

    # CSV: 4 features and an integer label per row, with and without a header.
    write("csv_fuzzer", "header", b"a,b,c,d,label\n0.5,1,-2,3e-1,2\n1,2,3,4,0\n")
    write("csv_fuzzer", "plain", b"0,0,0,0,1\n1.5,-1,2,0.25,0\n\n3,3,3,3,2\n")

    # Whole artifact sets: ONNX Runtime's MLP (tests/data/ort_mlp) and what `ontrain generate` makes, the
    # latter also after one training step (a checkpoint with optimizer state and properties).
    ort = os.path.join(ROOT, "tests/data/ort_mlp")

    def artifact_set(d):
        return sections(read(os.path.join(d, "training_model.onnx")),
                        read(os.path.join(d, "eval_model.onnx")) if os.path.exists(os.path.join(d, "eval_model.onnx")) else b"",
                        read(os.path.join(d, "optimizer_model.onnx")), read(os.path.join(d, "checkpoint")))

    write("session_fuzzer", "ort_mlp", artifact_set(ort))
    write("checkpoint_fuzzer", "ort_mlp", read(os.path.join(ort, "checkpoint")))
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in (("torch_mlp", "tests/data/torch/mlp/forward.onnx"), ("torch_cnn", "tests/data/torch/cnn/forward.onnx"),
                          ("torch_bn_dropout", "tests/data/torch/bn_dropout/forward.onnx")):
            d = os.path.join(tmp, name)
            run(args.ontrain, "generate", "--model", os.path.join(ROOT, src), "--out", d)
            write("session_fuzzer", name, artifact_set(d))
            write("checkpoint_fuzzer", name, read(os.path.join(d, "checkpoint")))
        d = os.path.join(tmp, "torch_mlp")
        data = os.path.join(tmp, "rows.npz")
        np.savez(data, input=np.zeros((8, 12), dtype=np.float32), labels=np.zeros(8, dtype=np.int64))
        run(args.ontrain, "train", "--artifacts", d, "--data", data, "--steps", "1", "--batch-size", "8",
            "--scheduler", "linear", "--warmup", "1", "--out", os.path.join(tmp, "run"))
        ckpts = sorted(glob.glob(os.path.join(tmp, "run", "**", "checkpoint*"), recursive=True))
        for i, p in enumerate(c for c in ckpts if not c.endswith(".data")):
            write("checkpoint_fuzzer", "after_training_%d" % i, read(p))
    print("wrote", sum(len(fs) for _, _, fs in os.walk(OUT)), "seeds under", os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
