"""ontrain: a training engine for ONNX models. `ontrain.api` has ONNX Runtime's Python training API and
`ontrain.artifacts` its generate_artifacts."""
from . import api, artifacts  # noqa: F401
