#!/usr/bin/python3
"""Writes tests/data/optimizer_models/: optimizer models in ONNX Runtime's conventions whose optimizer node is
surrounded by other nodes, as a user or a tool may write them: learning-rate arithmetic, gradient clipping
(InplaceClipGradNorm) and sequence ops. tools/ort_reference/make_reference.sh trains them in ONNX Runtime's
own engine; tests/engine/ort_parity_test.cc trains them in ontrain.

Run with Debian's /usr/bin/python3 (python3-onnx). Every model keeps ONNX Runtime's exact input signature
(learning_rate, step, params, gradients, first_order_moments[, second_order_moments]).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "optimizer_models")


def seq(name):
    return helper.make_tensor_sequence_value_info(name, TensorProto.FLOAT, None)


def inputs(adamw):
    ins = [helper.make_tensor_value_info("learning_rate", TensorProto.FLOAT, [1]),
           helper.make_tensor_value_info("step", TensorProto.INT64, [1]),
           seq("params"), seq("gradients"), seq("first_order_moments")]
    return ins + [seq("second_order_moments")] if adamw else ins


def adamw(lr, grads, flag="updated_flag"):
    # ontrain generate's (and onnxblock's) defaults: Hugging Face mode, epsilon 1e-6, no weight decay.
    return helper.make_node("AdamWOptimizer", [lr, "step", "params", grads, "first_order_moments",
                                               "second_order_moments"], [flag], domain=MS, alpha=0.9,
                            beta=0.999, epsilon=1e-6, weight_decay=0.0, adam_mode=1, correct_bias=1)


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def save(name, nodes, initializers, adamw_model=True):
    # SGD's flag has no declared shape: ONNX Runtime 1.19.2 rejects the [1] that onnxblock declares for it.
    flag = helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.BOOL, [1] if adamw_model else None)
    graph = helper.make_graph(nodes, "graph", inputs(adamw_model), [flag], initializer=initializers)
    model = helper.make_model(graph, producer_name="ontrain-tests",
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    onnx.save(model, os.path.join(OUT, name))
    print("wrote", name)


def main():
    os.makedirs(OUT, exist_ok=True)
    # 1. The learning rate halved by a Mul.
    save("adamw_lr_scaled.onnx", [helper.make_node("Mul", ["learning_rate", "half"], ["lr2"]),
                                  adamw("lr2", "gradients")], [const("half", [0.5])])
    # 2. A warm-up computed from the step: lr * min(1, step / 5).
    save("adamw_warmup.onnx", [
        helper.make_node("Cast", ["step"], ["step_f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["step_f", "five"], ["ramp"]),
        helper.make_node("Min", ["ramp", "one"], ["factor"]),
        helper.make_node("Mul", ["learning_rate", "factor"], ["lr2"]),
        adamw("lr2", "gradients")], [const("five", [5.0]), const("one", [1.0])])
    # 3. Gradients clipped to a global norm of 0.05 (the clipping changes them at every step).
    save("adamw_clip.onnx", [
        helper.make_node("InplaceClipGradNorm", ["gradients"], ["clipped"], domain=MS, max_norm=0.05),
        adamw("learning_rate", "clipped")], [])
    # 4. Sequence ops: the rate times 2 / (number of parameters), and the gradients taken apart and put
    #    back together (the last one out, then appended again). ONNX Runtime orders these sequences by a
    #    hash map, not by the model's parameter order, so a model that treats items by position would
    #    differ between engines; this one does not.
    save("adamw_sequence_ops.onnx", [
        helper.make_node("SequenceLength", ["params"], ["n"]),
        helper.make_node("Cast", ["n"], ["n_f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["two", "n_f"], ["factor"]),
        helper.make_node("Mul", ["learning_rate", "factor"], ["lr2"]),
        helper.make_node("SequenceAt", ["gradients", "last"], ["g_last"]),
        helper.make_node("SequenceErase", ["gradients", "last"], ["rest"]),
        helper.make_node("SequenceInsert", ["rest", "g_last"], ["regrouped"]),
        adamw("lr2", "regrouped")],
        [const("two", [2.0]), const("last", -1, np.int64)])
    # 5. SGD at ten times the rate, gradients clipped to norm 1.
    save("sgd_clip_lr.onnx", [
        helper.make_node("Mul", ["learning_rate", "ten"], ["lr2"]),
        helper.make_node("InplaceClipGradNorm", ["gradients"], ["clipped"], domain=MS, max_norm=1.0),
        helper.make_node("SGDOptimizerV2", ["lr2", "params", "clipped"], ["update_completed"], domain=MS)],
        [const("ten", [10.0])], adamw_model=False)


if __name__ == "__main__":
    sys.exit(main())
