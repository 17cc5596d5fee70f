"""ONNX Runtime's onnxruntime.training.artifacts over ontrain's own generator (C++ autodiff): LossType,
OptimType and generate_artifacts with ONNX Runtime's argument names. The artifacts follow ONNX Runtime's
conventions, so ONNX Runtime can train them too. Arguments ontrain cannot honour raise ValueError.
"""
import enum
import os

from . import _ontrain

__all__ = ["LossType", "OptimType", "generate_artifacts"]


class LossType(enum.Enum):
    MSELoss = 1
    CrossEntropyLoss = 2
    BCEWithLogitsLoss = 3
    L1Loss = 4


class OptimType(enum.Enum):
    AdamW = 1
    SGD = 2


_FILES = ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx")


def generate_artifacts(model, requires_grad=None, frozen_params=None, loss=None, optimizer=None,
                       artifact_directory=None, prefix="", ort_format=False, custom_op_library=None,
                       additional_output_names=None, nominal_checkpoint=False, loss_input_names=None,
                       **unsupported):
    """Writes {prefix}training_model.onnx, {prefix}eval_model.onnx, {prefix}optimizer_model.onnx (when
    `optimizer` is given) and checkpoint into artifact_directory (default: the current folder).

    model: an onnx.ModelProto or a path to an ONNX file. loss: a LossType (ONNX Runtime's onnxblock loss
    blocks are not supported). The loss reads the model's first output (and the labels as a new input).
    """
    if unsupported:
        raise ValueError(f"generate_artifacts: ontrain does not support the argument(s) {sorted(unsupported)}")
    if loss is None or not isinstance(loss, LossType):
        raise ValueError(f"generate_artifacts: loss must be a LossType ({', '.join(m.name for m in LossType)}); "
                         f"got {loss!r} (onnxblock loss blocks are not supported)")
    if optimizer is not None and not isinstance(optimizer, OptimType):
        raise ValueError(f"generate_artifacts: optimizer must be an OptimType (AdamW or SGD), got {optimizer!r}")
    if ort_format:
        raise ValueError("generate_artifacts: ort_format=True is not supported: ontrain writes ONNX files, which "
                         "ONNX Runtime reads as well")
    if custom_op_library is not None:
        raise ValueError("generate_artifacts: custom_op_library is not supported (ontrain has no custom op loader)")
    if nominal_checkpoint:
        raise ValueError("generate_artifacts: nominal_checkpoint=True is not supported; ontrain writes the full "
                         "checkpoint")
    if loss_input_names is not None:
        raise ValueError("generate_artifacts: loss_input_names is not supported; the loss reads the model's first "
                         "output")
    if hasattr(model, "SerializeToString"):
        model_bytes, model_path = model.SerializeToString(), ""
    elif isinstance(model, (str, os.PathLike)):
        model_bytes, model_path = b"", os.fspath(model)
    else:
        raise ValueError(f"generate_artifacts: model must be an onnx.ModelProto or a path, got {type(model).__name__}")
    out = os.fspath(artifact_directory) if artifact_directory is not None else os.getcwd()
    _ontrain.generate_artifacts(model_bytes, model_path, out, loss.name,
                                (optimizer or OptimType.AdamW).name, list(requires_grad or []),
                                list(frozen_params or []), list(additional_output_names or []))
    if optimizer is None:  # as ONNX Runtime: no optimizer model unless one is asked for
        os.remove(os.path.join(out, "optimizer_model.onnx"))
    if prefix:
        for name in _FILES:
            src = os.path.join(out, name)
            if os.path.exists(src):
                os.replace(src, os.path.join(out, prefix + name))
