"""ontrain: a training engine for ONNX models. `ontrain.api` has ONNX Runtime's Python training API."""
from . import api  # noqa: F401
