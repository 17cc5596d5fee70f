#!/usr/bin/python3
"""Writes a small MLP's training artifacts in ONNX Runtime's conventions, and a numpy reference run.

Output (tests/data/ort_mlp/): training_model.onnx, eval_model.onnx, optimizer_model.onnx, checkpoint
(ONNX Runtime's flatbuffer format, encoded by flatc from checkpoint/ort_checkpoint.fbs) and reference.txt:
the losses of 10 AdamW steps (adam_mode 1, weight decay 0.01, lr 1e-3) and the parameters after them,
computed with numpy in float64 independently of ontrain.

The model: input [batch,6] -> Gemm(fc1 [5,6], transB) -> Relu -> Gemm(fc2 [3,5], transB) = logits ->
SoftmaxCrossEntropyLoss(labels int64 [batch]). The backward graph is written by hand with the ops ONNX
Runtime's gradient builder emits (SoftmaxCrossEntropyLossGrad, Gemm, ReduceSum, ReluGrad), gradients are
accumulated with InPlaceAccumulatorV2, and the optimizer model is one AdamWOptimizer node.
Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy) from the repository root.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = "tests/data/ort_mlp"
B, D, H, C = 8, 6, 5, 3
STEPS, LR = 10, 1e-3
ALPHA, BETA, EPS, WD = 0.9, 0.999, 1e-6, 0.01
PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
LOSS = "onnx::loss::2"


def initial_params():
    rng = np.random.RandomState(1234)
    return {
        "fc1.weight": (rng.randn(H, D) * 0.5).astype(np.float32),
        "fc1.bias": (rng.randn(H) * 0.1).astype(np.float32),
        "fc2.weight": (rng.randn(C, H) * 0.5).astype(np.float32),
        "fc2.bias": (rng.randn(C) * 0.1).astype(np.float32),
    }


def batch(step):
    """The synthetic batch of tests/ort_artifacts.h."""
    i = np.arange(B * D)
    x = (np.sin(0.37 * i + 1.3 * step) * 0.8).astype(np.float32).reshape(B, D)
    labels = ((7 * np.arange(B) + 3 * step) % C).astype(np.int64)
    return x, labels


def forward_nodes():
    return [
        helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], [LOSS, "log_prob"], name="loss",
                         reduction="mean"),
    ]


def param_infos(params):
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(params[n].shape)) for n in PARAMS]


def user_inputs():
    return [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", D]),
            helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"])]


def outputs():
    return [helper.make_tensor_value_info(LOSS, TensorProto.FLOAT, []),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", C])]


def opsets():
    return [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def training_model(params):
    ms = "com.microsoft"
    nodes = forward_nodes() + [
        helper.make_node("SoftmaxCrossEntropyLossGrad", [LOSS + "_grad", "log_prob", "labels"], ["logits_grad"],
                         name="loss_Grad", domain=ms, reduction="mean"),
        helper.make_node("Gemm", ["logits_grad", "h2"], ["fc2.weight_grad"], name="fc2_Grad/dW", transA=1),
        helper.make_node("ReduceSum", ["logits_grad", "axes0"], ["fc2.bias_grad"], name="fc2_Grad/dB", keepdims=0),
        helper.make_node("Gemm", ["logits_grad", "fc2.weight"], ["h2_grad"], name="fc2_Grad/dX"),
        helper.make_node("ReluGrad", ["h2_grad", "h1"], ["h1_grad"], name="relu_Grad", domain=ms),
        helper.make_node("Gemm", ["h1_grad", "input"], ["fc1.weight_grad"], name="fc1_Grad/dW", transA=1),
        helper.make_node("ReduceSum", ["h1_grad", "axes0"], ["fc1.bias_grad"], name="fc1_Grad/dB", keepdims=0),
    ]
    inputs = user_inputs() + param_infos(params)
    outs = outputs()
    for k, p in enumerate(PARAMS):
        nodes.append(helper.make_node("InPlaceAccumulatorV2", [p + "_grad.accumulation.buffer", p + "_grad",
                                                               "lazy_reset_grad"],
                                      [p + "_grad.accumulation.out"], name=f"GradientAccumulator{k}", domain=ms))
        inputs.append(helper.make_tensor_value_info(p + "_grad.accumulation.buffer", TensorProto.FLOAT,
                                                    list(params[p].shape)))
        outs.append(helper.make_tensor_value_info(p + "_grad.accumulation.out", TensorProto.BOOL, [1]))
    inputs.append(helper.make_tensor_value_info("lazy_reset_grad", TensorProto.BOOL, [1]))
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), LOSS + "_grad"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0")]
    graph = helper.make_graph(nodes, "training", inputs, outs, inits)
    return helper.make_model(graph, opset_imports=opsets(), producer_name="ontrain-fixture", ir_version=8)


def eval_model(params):
    graph = helper.make_graph(forward_nodes(), "eval", user_inputs() + param_infos(params), outputs())
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ontrain-fixture",
                             ir_version=8)


def optimizer_model():
    seq = lambda n: helper.make_tensor_sequence_value_info(n, TensorProto.FLOAT, None)
    inputs = [helper.make_tensor_value_info("learning_rate", TensorProto.FLOAT, [1]),
              helper.make_tensor_value_info("step", TensorProto.INT64, [1]),
              seq("params"), seq("gradients"), seq("first_order_moments"), seq("second_order_moments")]
    node = helper.make_node("AdamWOptimizer", ["learning_rate", "step", "params", "gradients", "first_order_moments",
                                               "second_order_moments"], ["onnx::adamw.updated_flag::1"],
                            name="onnx::AdamWOptimizer::0", domain="com.microsoft", alpha=ALPHA, beta=BETA,
                            epsilon=EPS, weight_decay=WD, adam_mode=1, correct_bias=1)
    out = [helper.make_tensor_value_info("onnx::adamw.updated_flag::1", TensorProto.BOOL, [1])]
    graph = helper.make_graph([node], "graph", inputs, out)
    return helper.make_model(graph, opset_imports=opsets(), producer_name="orttraining", ir_version=8)


def write_checkpoint(params, path):
    tensors = [{"name": n, "dims": list(params[n].shape), "data_type": "FLOAT",
                "raw_data": list(params[n].astype("<f4").tobytes())} for n in PARAMS]
    doc = {"version": 2, "module_state": {"requires_grad_params": tensors, "frozen_params": []}}
    with tempfile.TemporaryDirectory(prefix="ontrain_fixture_") as tmp:
        js = os.path.join(tmp, "checkpoint.json")
        with open(js, "w") as f:
            json.dump(doc, f)
        subprocess.run(["flatc", "-b", "-o", tmp, "checkpoint/ort_checkpoint.fbs", js], check=True)
        os.replace(os.path.join(tmp, "checkpoint.bin"), path)


def reference_run(params):
    """Forward, backward and AdamW (adam_mode 1) in float64."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    losses = []
    for step in range(STEPS):
        x, labels = batch(step)
        x = x.astype(np.float64)
        h1 = x @ p["fc1.weight"].T + p["fc1.bias"]
        h2 = np.maximum(h1, 0)
        z = h2 @ p["fc2.weight"].T + p["fc2.bias"]
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        losses.append(-logp[np.arange(B), labels].mean())
        dz = np.exp(logp)
        dz[np.arange(B), labels] -= 1
        dz /= B
        g = {"fc2.weight": dz.T @ h2, "fc2.bias": dz.sum(0)}
        dh1 = (dz @ p["fc2.weight"]) * (h1 > 0)
        g["fc1.weight"] = dh1.T @ x
        g["fc1.bias"] = dh1.sum(0)
        t = step + 1
        for k in PARAMS:
            m[k] = ALPHA * m[k] + (1 - ALPHA) * g[k]
            v[k] = BETA * v[k] + (1 - BETA) * g[k] ** 2
            lr_c = LR * np.sqrt(1 - BETA ** t) / (1 - ALPHA ** t)
            p[k] = p[k] - lr_c * m[k] / (np.sqrt(v[k]) + EPS)
            p[k] = p[k] - LR * WD * p[k]
    return losses, p


def main():
    os.makedirs(OUT, exist_ok=True)
    params = initial_params()
    for name, model in [("training_model.onnx", training_model(params)), ("eval_model.onnx", eval_model(params)),
                        ("optimizer_model.onnx", optimizer_model())]:
        if name != "optimizer_model.onnx":
            onnx.checker.check_model(model)
        onnx.save(model, os.path.join(OUT, name))
    write_checkpoint(params, os.path.join(OUT, "checkpoint"))
    losses, final = reference_run(params)
    with open(os.path.join(OUT, "reference.txt"), "w") as f:
        f.write("# numpy float64 reference (tools/make_mlp_fixture.py): loss <step> <value>; param <name> <index> "
                "<value after %d steps>\n" % STEPS)
        for s, l in enumerate(losses):
            f.write("loss %d %.17g\n" % (s, l))
        for k in PARAMS:
            for i, val in enumerate(final[k].ravel()):
                f.write("param %s %d %.17g\n" % (k, i, val))
    print("wrote", OUT, "losses", ["%.6f" % l for l in losses])


if __name__ == "__main__":
    sys.exit(main())
